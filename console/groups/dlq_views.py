"""/groups/<group>/dlq/: a group's dead letters; operators redrive one, the selected, or all."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.accounts.roles import OPERATOR, change_requires_role
from console.core.store import get_store
from console.groups.dlq import MAX_REDRIVE_IDS, DlqMessages, dlq_exists, dlq_row
from console.groups.views import PAGE_SIZE, known_group, not_found
from console.operations import groups as operations
from storeadapter.engine import StoreError, dlq_topic

MAX_MESSAGE_ID_LENGTH = 100


@change_requires_role(OPERATOR)
@require_http_methods(["GET", "HEAD", "POST"])
def dlq_page(request: HttpRequest, group: str) -> HttpResponse:
    """The group's dead letters, paged; operators redrive one, the selected, or all."""
    store = get_store()
    try:
        topic = dlq_topic(group)
    except StoreError:
        return not_found(request, group)
    if not known_group(store, group) and not dlq_exists(store, group):
        return not_found(request, group)
    if request.method == "POST":
        return _redrive(request, group)
    listing = DlqMessages(store, topic)
    page = Paginator(listing, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "groups/dlq.html",
        {
            "group": group,
            "dlq_topic": topic,
            "exists": bool(listing.ranges),
            "page": page,
            "rows": [dlq_row(m) for m in page],
            "max_selected": MAX_REDRIVE_IDS,
        },
    )


def _redrive_ids(request: HttpRequest) -> list[str] | None | str:
    """The ids to redrive, None for all, or a sentence saying what is wrong."""
    action = request.POST.get("action", "")
    if action == "all":
        return None
    if action == "one":
        ids = [request.POST.get("message_id", "")]
    elif action == "selected":
        ids = request.POST.getlist("ids")
    else:
        return "That action is not known."
    ids = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    if not ids:
        return "Select at least one message to redrive."
    if len(ids) > MAX_REDRIVE_IDS:
        return f"Select at most {MAX_REDRIVE_IDS} messages at once, or redrive all."
    if any(len(i) > MAX_MESSAGE_ID_LENGTH for i in ids):
        return "That is not a message id."
    return ids


def _redrive(request: HttpRequest, group: str) -> HttpResponse:
    back = reverse("groups:dlq", args=[group])
    ids = _redrive_ids(request)
    if isinstance(ids, str):
        messages.error(request, f"{ids} Nothing was changed.")
        return redirect(back)
    try:
        outcome = operations.redrive(request.user, group, ids)
    except StoreError as error:
        messages.error(request, f"Nothing was redriven: {error}.")
        return redirect(back)
    if not outcome.results:
        messages.info(request, "There were no dead letters to redrive.")
    else:
        messages.success(request, operations.redrive_sentence(outcome))
    return redirect(back)
