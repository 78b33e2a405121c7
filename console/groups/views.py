"""/groups/ and below: consumer groups, their lag, members, offset resets and dead letters.

Reading pages need viewer. An offset reset is previewed first (POST to ``reset/preview/``,
which changes nothing but needs operator), then applied only from that preview (POST to
``reset/apply/`` with the plan the preview showed, refused if the offsets moved since); an
undo is previewed and applied the same way. Redriving dead letters is a POST to the DLQ
page. Every change writes an audit row and answers with a redirect and a flash; engine
refusals are shown in the engine's words, never as a 500.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.accounts.roles import ADMIN, OPERATOR, change_requires_role, require_role
from console.api.models import PREVIEW_LIFETIME
from console.api.previews import keep_preview, kept_plan, kept_preview
from console.core.store import get_store
from console.groups.detail import filter_groups, group_rows, reason_label
from console.groups.detail import group_detail as read_group_detail
from console.groups.dlq import DlqMessages, dlq_exists, dlq_row
from console.groups.forms import MAX_REDRIVE_IDS, ResetForm
from console.monitoring import scale
from console.operations import groups as operations
from console.operations.groups import GroupNotFoundError, undo_url
from storeadapter.engine import STATUS_DUPLICATE, MessageStore, StoreError, dlq_topic
from storeadapter.offset_reset import (
    HISTORY_KEPT,
    MODES,
    ResetConflictError,
    ResetError,
    ResetPlan,
    preview_reset,
    preview_undo,
)
from storeadapter.summaries import group_summaries, group_summary

PAGE_SIZE = 50
HISTORY_SHOWN = 50
MAX_MESSAGE_ID_LENGTH = 100


def _detail_url(group: str, fragment: str = "") -> str:
    url = reverse("groups:detail", args=[group])
    return f"{url}#{fragment}" if fragment else url


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _known_group(store: MessageStore, group: str) -> bool:
    return group in store.groups()


def _not_found(request: HttpRequest, group: str) -> HttpResponse:
    return render(request, "groups/not_found.html", {"group": group}, status=404)


# ---------------------------------------------------------------------------- list


@require_role("viewer")
@require_http_methods(["GET", "HEAD"])
def group_list(request: HttpRequest) -> HttpResponse:
    """Every group, most behind first, with its lag, topics and live members."""
    store = get_store()
    query = request.GET.get("q", "").strip()[:200]
    topic = request.GET.get("topic", "").strip()[:200]
    summaries = filter_groups(
        group_summaries(store, with_queues=False, figures=scale.SampledFigures()), query, topic
    )
    page = Paginator(summaries, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = group_rows(store, list(page))
    context = {
        "page": page,
        "rows": rows,
        "total_lag": sum(s.lag for s in summaries),
        "query": query,
        "topic": topic,
    }
    return render(request, "groups/list.html", context)


# -------------------------------------------------------------------------- detail


@dataclass(frozen=True)
class HistoryRow:
    time_ms: int
    who: str
    topic: str
    queue: int
    old: int | None
    new: int
    reason: str
    label: str
    undo_url: str | None


@require_role("viewer")
@require_http_methods(["GET", "HEAD"])
def group_detail(request: HttpRequest, group: str) -> HttpResponse:
    """One group: lag per queue, members, offset history; the reset form for operators."""
    store = get_store()
    if not _known_group(store, group):
        return _not_found(request, group)
    return _render_detail(request, store, group)


def _render_detail(
    request: HttpRequest, store: MessageStore, group: str, reset_form: ResetForm | None = None
) -> HttpResponse:
    paged = request.GET.get("topic", "")
    detail = read_group_detail(store, group, {paged: request.GET.get("page", "")})
    latest_reset = detail.latest_resets
    history_rows = [
        HistoryRow(
            c.time_ms,
            c.who,
            c.topic,
            c.queue,
            c.old,
            c.new,
            c.reason,
            reason_label(c.reason),
            undo_url(group, c.topic) if latest_reset.get(c.topic) == c.reason else None,
        )
        for c in detail.history[:HISTORY_SHOWN]
    ]
    if reset_form is None:
        reset_form = ResetForm(topics=detail.summary.topics)
    context = {
        "group": group,
        "summary": detail.summary,
        "topic_tables": detail.topic_tables(),
        "members": detail.members,
        "history": history_rows,
        "history_shown": HISTORY_SHOWN,
        "reset_form": reset_form,
        "has_dlq": dlq_exists(store, group),
        "metrics": detail.metrics,
    }
    return render(request, "groups/detail.html", context)


# ---------------------------------------------------------------------- offset reset


@require_role(OPERATOR)
@require_http_methods(["POST"])
def reset_preview(request: HttpRequest, group: str) -> HttpResponse:
    """What a reset would do, per queue, with the form that applies exactly that."""
    store = get_store()
    if not _known_group(store, group):
        return _not_found(request, group)
    summary = group_summary(store, group)
    form = ResetForm(request.POST, topics=summary.topics)
    if not form.is_valid():
        return _render_detail(request, store, group, form)
    try:
        plan = preview_reset(
            store, group, form.cleaned_data["topic"], form.cleaned_data["mode"], form.reset_value()
        )
    except StoreError as error:
        form.add_error(None, str(error))
        return _render_detail(request, store, group, form)
    return _render_preview(request, group, plan)


@require_role(OPERATOR)
@require_http_methods(["GET", "HEAD"])
def reset_undo(request: HttpRequest, group: str) -> HttpResponse:
    """The preview of undoing the group's latest reset on ``?topic=``."""
    store = get_store()
    if not _known_group(store, group):
        return _not_found(request, group)
    topic = request.GET.get("topic", "").strip()
    if not topic:
        messages.error(request, "Choose the topic whose latest reset to undo.")
        return redirect(_detail_url(group, "history"))
    try:
        plan = preview_undo(store, group, topic)
    except StoreError as error:
        messages.error(request, f"Nothing to undo: {error}.")
        return redirect(_detail_url(group, "history"))
    return _render_preview(request, group, plan)


def _render_preview(request: HttpRequest, group: str, plan: ResetPlan) -> HttpResponse:
    """The preview page; its form sends the plan back, or, for a big topic's plan (too big
    for a page), the token it is kept under."""
    context = {
        "group": group,
        "plan": plan,
        "is_undo": plan.mode == "undo",
        "plan_json": json.dumps(plan.as_dict(), sort_keys=True) if plan.listed_all else "",
        "kept_token": "" if plan.listed_all else plan.token,
        "changes": plan.moved,
        "listed": len(plan.queues),
        "consumed_again": plan.consumed_again,
        "skipped": plan.skipped,
        "clamped": plan.clamped,
        "value_ms": plan.value if plan.mode == "time" else None,
        "history_kept": HISTORY_KEPT,
    }
    if not plan.listed_all:
        keep_preview(plan)
    return render(request, "groups/preview.html", context)


@require_role(OPERATOR)
@require_http_methods(["POST"])
def reset_apply(request: HttpRequest, group: str) -> HttpResponse:
    """Apply the previewed plan as it was shown, or refuse and change nothing."""
    store = get_store()
    if not _known_group(store, group):
        return _not_found(request, group)
    kept = None
    try:
        if request.POST.get("token"):
            kept = kept_preview(request.POST["token"], group)
            if kept is None:
                raise ResetError("it is not kept here, or was applied already")
            if kept.expired:
                minutes = int(PREVIEW_LIFETIME.total_seconds() // 60)
                raise ResetError(f"it is more than {minutes} minutes old")
            plan = kept_plan(kept)
        else:
            data = json.loads(request.POST.get("plan", ""))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            plan = ResetPlan.from_dict(data)
        if plan.group != group or plan.mode not in MODES:
            raise ResetError("this preview is for another group or mode")
    except (ValueError, ResetError) as error:
        messages.error(
            request,
            f"That reset preview cannot be used ({error}); nothing was changed. "
            "Preview the reset again.",
        )
        return redirect(_detail_url(group))
    if not plan.moved:
        messages.info(request, "The preview changes no offset; nothing was done.")
        return redirect(_detail_url(group))
    try:
        operations.apply_reset_plan(request.user, plan)
    except ResetConflictError:
        messages.error(
            request,
            f"The offsets of {group} on {plan.topic} moved since the preview (its consumers "
            "committed meanwhile), so nothing was changed. Preview the reset again.",
        )
        return redirect(_detail_url(group))
    except StoreError as error:
        messages.error(request, f"The reset was refused: {error}. Nothing was changed.")
        return redirect(_detail_url(group))
    if kept is not None:
        kept.delete()
    undo = plan.mode == "undo"
    moved, again, skipped = plan.moved, plan.consumed_again, plan.skipped
    what = "Undid the latest reset" if undo else f"Reset to {plan.mode}"
    messages.success(
        request,
        f"{what} of {group} on {plan.topic}: {moved} queue{_s(moved)} moved; "
        f"{again} message{_s(again)} will be consumed again, {skipped} skipped.",
    )
    return redirect(_detail_url(group))


# ----------------------------------------------------------------------------- DLQ


@change_requires_role(OPERATOR)
@require_http_methods(["GET", "HEAD", "POST"])
def dlq_page(request: HttpRequest, group: str) -> HttpResponse:
    """The group's dead letters, paged; operators redrive one, the selected, or all."""
    store = get_store()
    try:
        topic = dlq_topic(group)
    except StoreError:
        return _not_found(request, group)
    if not _known_group(store, group) and not dlq_exists(store, group):
        return _not_found(request, group)
    if request.method == "POST":
        return _redrive(request, store, group)
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


def _redrive(request: HttpRequest, store: MessageStore, group: str) -> HttpResponse:
    back = reverse("groups:dlq", args=[group])
    ids = _redrive_ids(request)
    if isinstance(ids, str):
        messages.error(request, f"{ids} Nothing was changed.")
        return redirect(back)
    try:
        results = operations.redrive(request.user, group, ids)
    except StoreError as error:
        messages.error(request, f"Nothing was redriven: {error}.")
        return redirect(back)
    if not results:
        messages.info(request, "There were no dead letters to redrive.")
        return redirect(back)
    sent = [r for r in results if r.status != STATUS_DUPLICATE]
    text = f"Redrove {len(results)} message{_s(len(results))} to their original topics."
    if len(sent) < len(results):
        text += f" {len(results) - len(sent)} had been redriven before and were not sent again."
    messages.success(request, text)
    return redirect(back)


# ------------------------------------------------------------- copy and delete


@require_role(OPERATOR)
@require_http_methods(["POST"])
def copy_from(request: HttpRequest, group: str) -> HttpResponse:
    """Give this group the committed offsets of another group."""
    source = request.POST.get("source", "").strip()
    try:
        changes = operations.copy_group_offsets(request.user, source, group)
    except GroupNotFoundError:
        messages.error(request, f"there is no group named {source!r} to copy offsets from")
        return redirect(_detail_url(group))
    except StoreError as error:
        messages.error(request, str(error))
        return redirect(_detail_url(group))
    messages.success(request, f"Copied {len(changes)} offset(s) from {source} to {group}.")
    return redirect(_detail_url(group))


@require_role(ADMIN)
@require_http_methods(["POST"])
def delete_group(request: HttpRequest, group: str) -> HttpResponse:
    """Forget a group; the admin types its name to confirm."""
    store = get_store()
    if not _known_group(store, group):
        return _not_found(request, group)
    if request.POST.get("confirm", "") != group:
        messages.error(request, f"type the group's name, {group}, to delete it")
        return redirect(_detail_url(group))
    operations.delete_group(request.user, group)
    messages.success(request, f"Deleted group {group}: its offsets and history are gone.")
    return redirect(reverse("groups:list"))
