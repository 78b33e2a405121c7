"""/groups/ and /groups/<group>/: consumer groups, their lag, members, history; deletion.

Reading pages need viewer. The offset reset pages are in reset_views.py, the dead
letters' in dlq_views.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.accounts.permissions import GROUP, RESET, permissions_of, visible_groups
from console.core.post_only import post_only
from console.core.sort_links import header_sort_links
from console.core.store import get_store
from console.groups.detail import (
    DEFAULT_GROUP_SORT,
    GROUP_SORTS,
    filter_groups,
    group_rows,
    sort_groups,
)
from console.groups.detail import group_detail as read_group_detail
from console.groups.forms import ResetForm
from console.groups.models import AppliedReset
from console.groups.resets import applied_resets
from console.monitoring import scale
from console.operations import groups as operations
from storeadapter.engine import MessageStore
from storeadapter.offset_reset import describe_reason
from storeadapter.summaries import group_summaries

PAGE_SIZE = 50
#: The header links sorting by their own column's name (the name's link turns its order).
HEADER_SORTS = ("status", "lag", "lag_seconds", "consume_rate", "queues_behind", "topics")
HISTORY_SHOWN = 50
#: The group page lists this many of its latest resets (the Resets page lists all kept).
RESETS_SHOWN = 10


def detail_url(group: str, fragment: str = "") -> str:
    url = reverse("groups:detail", args=[group])
    return f"{url}#{fragment}" if fragment else url


def known_group(store: MessageStore, group: str) -> bool:
    return group in store.groups()


def not_found(request: HttpRequest, group: str) -> HttpResponse:
    return render(request, "groups/not_found.html", {"group": group}, status=404)


# ---------------------------------------------------------------------------- list


@require_http_methods(["GET", "HEAD"])
def group_list(request: HttpRequest) -> HttpResponse:
    """Every group, most behind first, with its lag, topics and live members."""
    store = get_store()
    query = request.GET.get("q", "").strip()[:200]
    topic = request.GET.get("topic", "").strip()[:200]
    sort = request.GET.get("sort", DEFAULT_GROUP_SORT)
    if sort not in GROUP_SORTS:
        sort = DEFAULT_GROUP_SORT
    summaries = filter_groups(
        visible_groups(
            request.user, group_summaries(store, with_queues=False, figures=scale.SampledFigures())
        ),
        query,
        topic,
    )
    if sort != DEFAULT_GROUP_SORT:  # the summaries come most behind first
        summaries = sort_groups(summaries, sort)
    page = Paginator(summaries, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = group_rows(store, list(page))
    # The groups of the page the user may reset (the "Reset selected…" checkboxes).
    permissions = permissions_of(request.user)
    resettable = {row.group for row in rows if permissions.allows(GROUP, row.group, RESET)}
    context = {
        "page": page,
        "rows": rows,
        "total_lag": sum(s.lag for s in summaries),
        "query": query,
        "topic": topic,
        "sort": sort,
        "sort_links": header_sort_links(request.GET, sort, HEADER_SORTS),
        "sort_label": GROUP_SORTS[sort][0],
        "resettable": resettable,
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
    #: The applied reset (in the Resets list) this change was part of.
    reset_id: int | None


def history_lines(changes: list) -> list[HistoryRow]:
    """The offset history's rows, each reset named by its id in the Resets list ("reset
    #7 to earliest"), an undo by the reset it undid ("undo of reset #6")."""
    described = [(c, *describe_reason(c.reason)) for c in changes]
    ids = {reset_id for _, _, reset_id in described if reset_id is not None}
    undone = dict(AppliedReset.objects.filter(pk__in=ids).values_list("pk", "undoes_id"))
    rows = []
    for c, label, reset_id in described:
        if reset_id is not None:
            if label.startswith("undo"):
                was = undone.get(reset_id)
                label = f"undo of reset #{was}" if was else "undo of a reset no longer kept"
            else:
                label = f"reset #{reset_id}{label.removeprefix('reset')}"
        rows.append(
            HistoryRow(c.time_ms, c.who, c.topic, c.queue, c.old, c.new, c.reason, label, reset_id)
        )
    return rows


@require_http_methods(["GET", "HEAD"])
def group_detail(request: HttpRequest, group: str) -> HttpResponse:
    """One group: lag per queue, members, offset history; the reset form for operators."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    return render_detail(request, store, group)


def render_detail(
    request: HttpRequest, store: MessageStore, group: str, reset_form: ResetForm | None = None
) -> HttpResponse:
    paged = request.GET.get("topic", "")
    detail = read_group_detail(store, group, {paged: request.GET.get("page", "")})
    history_rows = history_lines(detail.history[:HISTORY_SHOWN])
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
        "resets": list(applied_resets(group)[:RESETS_SHOWN]),
        "resets_shown": RESETS_SHOWN,
        "has_dlq": detail.has_dlq,
        "metrics": detail.metrics,
    }
    return render(request, "groups/detail.html", context)


@post_only(lambda group: detail_url(group, "delete"))
def delete_group(request: HttpRequest, group: str) -> HttpResponse:
    """Forget a group; the admin types its name to confirm."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    if request.POST.get("confirm", "") != group:
        messages.error(request, f"type the group's name, {group}, to delete it")
        return redirect(detail_url(group))
    operations.delete_group(request.user, group)
    messages.success(request, f"Deleted group {group}: its offsets and history are gone.")
    return redirect(reverse("groups:list"))
