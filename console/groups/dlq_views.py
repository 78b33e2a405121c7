"""/groups/<group>/dlq/: a group's dead messages (copies grouped by the original message);
operators redrive one, the selected, or all waiting, and purge."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.core.store import get_store
from console.groups import dlq
from console.groups.dlq import MAX_REDRIVE_IDS, dead_message_row, dead_messages, dlq_exists
from console.groups.views import PAGE_SIZE, known_group, not_found
from console.operations import groups as operations
from storeadapter.engine import StoreError, dlq_topic

MAX_MESSAGE_ID_LENGTH = 100


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
        if request.POST.get("action") == "purge":
            return _purge(request, group)
        return _redrive(request, group)
    dead = dead_messages(store, group)
    page = Paginator(dead, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "groups/dlq.html",
        {
            "group": group,
            "dlq_topic": topic,
            "exists": dlq_exists(store, group),
            "page": page,
            "rows": [dead_message_row(d) for d in page],
            "copies": sum(len(d.copies) for d in dead),
            "waiting": sum(1 for d in dead if d.waiting),
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
        outcome = dlq.redrive(request.user, get_store(), group, ids)
    except dlq.NothingWaiting as nothing:
        messages.info(request, str(nothing))
        return redirect(back)
    except StoreError as error:
        messages.error(request, f"Nothing was redriven: {error}.")
        return redirect(back)
    if not outcome.results:
        messages.info(request, "There were no dead letters to redrive.")
    else:
        messages.success(request, operations.redrive_sentence(outcome))
    return redirect(back)


def _purge(request: HttpRequest, group: str) -> HttpResponse:
    back = reverse("groups:dlq", args=[group])
    if request.POST.get("confirm", "").strip() != group:
        messages.error(request, dlq.purge_sentence_refused(group))
        return redirect(back)
    try:
        purged = dlq.purge(request.user, get_store(), group)
    except StoreError as error:
        messages.error(request, f"Nothing was purged: {error}.")
        return redirect(back)
    messages.success(request, purged.sentence(group))
    return redirect(back if known_group(get_store(), group) else reverse("groups:list"))
