"""Offset resets on the group pages: preview, apply, preview again, undo, the Resets list.

A reset is previewed first (POST ``reset/preview/``: changes nothing but needs operator);
the preview is kept on the server and its page's Apply button sends back only its token
(POST ``reset/apply/``), so what is applied is the plan the server made. A preview that
no longer means what it said, or expired, is refused with a one-click "Preview again"
(POST ``reset/again/``). Every applied reset gets an entry in the group's Resets list
(``resets/``), whose undo (``resets/<id>/undo/``) is previewed and applied the same way.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods

from console.core.post_only import post_only
from console.core.store import get_store
from console.groups.detail import live_members
from console.groups.forms import ResetForm
from console.groups.models import RESETS_KEPT, RESETS_KEPT_FOR, ResetPreview
from console.groups.resets import (
    PreviewExpiredError,
    PreviewNotFoundError,
    applied_reset,
    applied_resets,
    keep_preview,
    kept_preview,
    preview_again,
    preview_minutes,
    preview_undo_of,
)
from console.groups.views import PAGE_SIZE, detail_url, known_group, not_found, render_detail
from console.operations import groups as operations
from storeadapter.engine import StoreError
from storeadapter.offset_reset import (
    ResetConflictError,
    ResetOutdatedError,
    ResetPlan,
    preview_reset,
)
from storeadapter.reset_modes import UNDO
from storeadapter.summaries import group_summary


def _s(count: int) -> str:
    return "" if count == 1 else "s"


@post_only(lambda group: detail_url(group, "reset"))
def reset_preview(request: HttpRequest, group: str) -> HttpResponse:
    """What a reset would do, per queue, with the button that applies exactly that."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    form = ResetForm(request.POST, topics=group_summary(store, group).topics)
    if not form.is_valid():
        return render_detail(request, store, group, form)
    data = form.cleaned_data
    try:
        plan = preview_reset(store, group, data["topic"], data["mode"], form.reset_value())
    except StoreError as error:
        form.add_error(None, str(error))
        return render_detail(request, store, group, form)
    return _render_preview(request, plan)


@post_only(lambda group: detail_url(group, "reset"))
def reset_again(request: HttpRequest, group: str) -> HttpResponse:
    """A new preview of what a refused or expired preview asked for."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    try:
        plan = preview_again(store, kept_preview(request.POST.get("token", ""), group))
    except StoreError as error:
        messages.error(request, f"That reset cannot be previewed again: {error}.")
        return redirect(detail_url(group, "reset"))
    return _render_preview(request, plan)


@require_http_methods(["GET", "HEAD"])
def reset_undo(request: HttpRequest, group: str, reset: int) -> HttpResponse:
    """The preview of undoing applied reset ``reset``: back to the offsets it replaced."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    try:
        plan = preview_undo_of(store, applied_reset(group, reset))
    except StoreError as error:
        messages.error(request, f"Nothing to undo: {error}.")
        return redirect(detail_url(group, "resets"))
    return _render_preview(request, plan)


def _render_preview(request: HttpRequest, plan: ResetPlan) -> HttpResponse:
    """The preview page; its Apply button sends back the token the plan is kept under."""
    kept = keep_preview(plan)
    context = {
        "group": plan.group,
        "plan": plan,
        "token": kept.token,
        "is_undo": plan.mode == UNDO,
        "changes": plan.moved,
        "listed": len(plan.queues),
        "consumed_again": plan.consumed_again,
        "skipped": plan.skipped,
        "clamped": plan.clamped,
        "value_ms": plan.value if plan.mode == "time" else None,
        "members": len(live_members(get_store(), plan.group)),
        "minutes": preview_minutes(),
    }
    return render(request, "groups/preview.html", context)


@post_only(lambda group: detail_url(group, "reset"))
def reset_apply(request: HttpRequest, group: str) -> HttpResponse:
    """Apply a kept preview, or say why not (nothing is changed then)."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    token = request.POST.get("token", "")
    try:
        applied = operations.apply_kept_preview(request.user, group, token)
    except PreviewNotFoundError as error:
        messages.error(
            request, f"That reset preview cannot be used ({error}); nothing was changed."
        )
        return redirect(detail_url(group, "reset"))
    except (PreviewExpiredError, ResetOutdatedError, ResetConflictError) as error:
        return _render_refused(request, group, token, error)
    except StoreError as error:
        messages.error(request, f"The reset was refused: {error}. Nothing was changed.")
        return redirect(detail_url(group, "reset"))
    reset, plan = applied.reset, applied.plan
    if reset is None:
        messages.info(
            request, "Every queue was already where the preview puts it; nothing changed."
        )
        return redirect(detail_url(group, "resets"))
    if reset.is_undo:
        what = f"Undo of reset #{plan.value} of {group} on {plan.topic} applied"
    else:
        what = f"Reset to {plan.mode} of {group} on {plan.topic} applied"
    moved, again, skipped = reset.moved, reset.consumed_again, reset.skipped
    messages.success(
        request,
        format_html(
            "{} (reset #{}): {} queue{} moved; {} message{} will be consumed again, {} "
            'skipped. <a href="{}">Undo reset #{}…</a>',
            what,
            reset.pk,
            f"{moved:,}",
            _s(moved),
            f"{again:,}",
            _s(again),
            f"{skipped:,}",
            operations.reset_undo_url(group, reset.pk),
            reset.pk,
        ),
    )
    return redirect(detail_url(group, "resets"))


def _render_refused(
    request: HttpRequest, group: str, token: str, error: StoreError
) -> HttpResponse:
    sentence = str(error)
    context = {
        "group": group,
        "token": token,
        "reason": sentence[:1].upper() + sentence[1:],
        "kept": ResetPreview.objects.filter(token=token, group=group).exists(),
    }
    return render(request, "groups/reset_refused.html", context, status=409)


@require_http_methods(["GET", "HEAD"])
def reset_list(request: HttpRequest, group: str) -> HttpResponse:
    """Every kept reset of the group, newest first, each with its undo."""
    store = get_store()
    if not known_group(store, group):
        return not_found(request, group)
    page = Paginator(applied_resets(group).select_related("undoes"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {
        "group": group,
        "page": page,
        "resets": list(page),
        "kept": RESETS_KEPT,
        "kept_days": RESETS_KEPT_FOR.days,
    }
    return render(request, "groups/resets.html", context)
