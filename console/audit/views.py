from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.accounts.permissions import may_open
from console.audit.forms import AuditFilterForm
from console.audit.models import AuditEntry
from console.audit.visibility import visible_entries

PAGE_SIZE = 50


@require_safe
def audit_list(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first, 50 a page, filtered by the GET form."""
    form = AuditFilterForm(request.GET or None)
    entries = visible_entries(request.user, AuditEntry.objects.all())
    if form.is_bound and not form.is_valid():
        entries = entries.none()
    elif form.is_bound:
        entries = form.filter(entries)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    for entry in page:
        # A link only for users who may open it (a viewer's undo link would be a 403).
        entry.shown_link = entry.link if entry.link and may_open(request, entry.link) else ""
    actions = AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct()
    return render(
        request,
        "audit/list.html",
        {"form": form, "page": page, "known_actions": actions},
    )
