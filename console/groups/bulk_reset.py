"""/groups/selected/reset/: reset the groups selected on the group list to one target.

Three steps, each a POST from the one before (``step``):

1. the list's "Reset selected…" posts the groups: the answer is the reset form (console.
   groups.forms.ResetForm, the modes of storeadapter.reset_modes.RESET_MODES) offering the
   topics every selected group consumes;
2. ``preview``: each group's reset is planned (``preview_reset``) and kept by its own token
   (``keep_preview``), as the group page's preview is; one page shows them all, with the
   totals, and applies them all;
3. ``apply``: each kept preview is applied to its group by
   ``console.operations.groups.apply_kept_preview``: one reset per group, each in its
   group's Resets list with its own undo, each audited (``offset.reset``).

Each group is checked against the user's roles at every step: a request naming a group
the user may not reset is refused whole (403), the sentence naming those groups.

The rule is this module's, for the page and the API's ``/api/v1/selected/groups/reset/``
alike: ``selection``, ``refused``, ``unknown``, ``not_consuming``, ``preview_each`` (one
kept preview per group, all or none) and ``apply_each`` (one reset, one undo and one
audit row per group; a group whose reset is refused is reported with its sentence, the
others go on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html

from console.accounts.permissions import GROUP, RESET, Denial, forbidden_page, permissions_of
from console.core.post_only import post_only
from console.core.store import get_store
from console.groups.forms import ResetForm
from console.groups.models import ResetPreview
from console.groups.resets import keep_preview, preview_minutes
from console.monitoring import scale
from console.operations import groups as operations
from storeadapter.engine import MessageStore, StoreError
from storeadapter.offset_reset import ResetPlan, preview_reset
from storeadapter.summaries import group_summary

#: The most groups one request resets.
MAX_SELECTED = 100
#: The longest name taken (a group name is shorter): longer is not a group.
MAX_NAME = 300


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _listing(names: list[str]) -> str:
    return ", ".join(names)


def selection(values: list[str], what: str = "group") -> list[str] | str:
    """The groups (or tokens) chosen, in order and once each; or a sentence saying what
    is wrong."""
    return _chosen(values, what)


def _chosen(values: list[str], what: str) -> list[str] | str:
    chosen = list(dict.fromkeys(v.strip() for v in values if v.strip()))
    if not chosen:
        return f"Select at least one {what}."
    if len(chosen) > MAX_SELECTED:
        return f"Select at most {MAX_SELECTED} groups at once."
    if any(len(v) > MAX_NAME for v in chosen):
        return f"That is not a {what}."
    return chosen


def refused(user: Any, groups: list[str]) -> list[str]:
    """The groups of ``groups`` that ``user``'s roles do not let them reset."""
    permissions = permissions_of(user)
    return [group for group in groups if not permissions.allows(GROUP, group, RESET)]


def refusal_sentence(groups: list[str]) -> str:
    which = "group" if len(groups) == 1 else "groups"
    return (
        f"Your roles do not allow you to reset the {which} {_listing(groups)}; nothing was changed."
    )


def unknown(store: MessageStore, groups: list[str]) -> list[str]:
    """The groups of ``groups`` the store does not know."""
    known = set(store.groups())
    return [group for group in groups if group not in known]


def unknown_sentence(groups: list[str]) -> str:
    return f"There is no group {_listing(groups)}; nothing was changed."


def not_consuming(store: MessageStore, groups: list[str], topic: str) -> list[str]:
    """The groups of ``groups`` that have no offsets on ``topic``."""
    figures = scale.SampledFigures()
    return [
        group
        for group in groups
        if topic not in group_summary(store, group, with_queues=False, figures=figures).topics
    ]


def _refusal(request: HttpRequest, groups: list[str]) -> HttpResponse | None:
    """The 403 for the groups the user may not reset, or None when they may reset all."""
    not_allowed = refused(request.user, groups)
    if not not_allowed:
        return None
    return forbidden_page(request, Denial(False, refusal_sentence(not_allowed)))


def _common_topics(store: MessageStore, groups: list[str]) -> list[str]:
    figures = scale.SampledFigures()
    common: list[str] | None = None
    for group in groups:
        topics = group_summary(store, group, with_queues=False, figures=figures).topics
        common = list(topics) if common is None else [t for t in common if t in topics]
    return common or []


@dataclass(frozen=True)
class Previewed:
    """One group's part of the preview."""

    group: str
    plan: ResetPlan
    token: str
    kept: ResetPreview | None = None


class PreviewRefused(Exception):
    """One group's reset could not be previewed: nothing was previewed (``group``, and the
    store's ``error``)."""

    def __init__(self, group: str, error: StoreError) -> None:
        super().__init__(f"{group}: {error}. Nothing was previewed.")
        self.group = group
        self.error = error


def preview_each(
    store: MessageStore, groups: list[str], topic: str, mode: str, value: Any
) -> list[Previewed]:
    """Each group's reset to the same target planned and kept (its own token); all or
    none: PreviewRefused when one cannot be planned (then none is kept)."""
    plans = []
    for group in groups:
        try:
            plans.append(preview_reset(store, group, topic, mode, value))
        except StoreError as error:
            raise PreviewRefused(group, error) from error
    shown = []
    for plan in plans:
        kept = keep_preview(plan)
        shown.append(Previewed(plan.group, plan, kept.token, kept))
    return shown


def kept_groups(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """The group of each kept preview of ``tokens``, and the tokens not kept (applied
    already, or never made)."""
    kept = dict(ResetPreview.objects.filter(token__in=tokens).values_list("token", "group"))
    return kept, [token for token in tokens if token not in kept]


def missing_tokens_sentence(tokens: list[str]) -> str:
    return (
        f"The reset previews {_listing(tokens)} cannot be used (applied already, or never "
        "made); nothing was changed. Preview again."
    )


@dataclass(frozen=True)
class AppliedOne:
    """One group's part of applying the previews: what was applied (None when refused),
    or the sentence saying why its offsets stay."""

    group: str
    token: str
    applied: operations.AppliedResult | None
    error: str | None = None


def apply_each(user: Any, tokens: list[str], kept: dict[str, str]) -> list[AppliedOne]:
    """Apply each kept preview (``kept``: token → group, checked by the caller: roles) to
    its group by ``console.operations.groups.apply_kept_preview``: one reset, its undo and
    its audit row per group; a refused one does not stop the others."""
    outcomes = []
    for token in tokens:
        group = kept[token]
        try:
            applied = operations.apply_kept_preview(user, group, token, undoing=False)
        except StoreError as error:
            sentence = f"The reset was refused: {error}. Its offsets stay."
            outcomes.append(AppliedOne(group, token, None, sentence))
        else:
            outcomes.append(AppliedOne(group, token, applied))
    return outcomes


def _form_page(
    request: HttpRequest, groups: list[str], form: ResetForm, status: int = 200
) -> HttpResponse:
    context = {"groups": groups, "count": len(groups), "form": form}
    return render(request, "groups/reset_selected.html", context, status=status)


def _preview(request: HttpRequest, store: MessageStore, groups: list[str]) -> HttpResponse:
    form = ResetForm(request.POST, topics=_common_topics(store, groups))
    if not form.is_valid():
        return _form_page(request, groups, form)
    data = form.cleaned_data
    try:
        shown = preview_each(store, groups, data["topic"], data["mode"], form.reset_value())
    except PreviewRefused as refusal:
        form.add_error(None, str(refusal))
        return _form_page(request, groups, form)
    first = shown[0].plan
    context = {
        "previews": shown,
        "count": len(shown),
        "topic": first.topic,
        "plan": first,
        "value_ms": first.value if first.mode == "time" else None,
        "moved": sum(p.plan.moved for p in shown),
        "consumed_again": sum(p.plan.consumed_again for p in shown),
        "skipped": sum(p.plan.skipped for p in shown),
        "clamped": sum(p.plan.clamped for p in shown),
        "minutes": preview_minutes(),
    }
    return render(request, "groups/reset_selected_preview.html", context)


def _apply(request: HttpRequest) -> HttpResponse:
    back = reverse("groups:list")
    tokens = _chosen(request.POST.getlist("tokens"), "reset preview")
    if isinstance(tokens, str):
        messages.error(request, f"{tokens} Nothing was changed.")
        return redirect(back)
    kept, missing = kept_groups(tokens)
    if missing:
        messages.error(request, missing_tokens_sentence(missing))
        return redirect(back)
    refusal = _refusal(request, list(dict.fromkeys(kept[token] for token in tokens)))
    if refusal is not None:
        return refusal
    for outcome in apply_each(request.user, tokens, kept):
        group, applied = outcome.group, outcome.applied
        if applied is None:
            messages.error(request, f"{group}: {outcome.error}")
            continue
        reset = applied.reset
        if reset is None:
            messages.info(request, f"{group}: every queue was already there; nothing changed.")
            continue
        undo = operations.reset_undo_url(group, reset.pk)
        messages.success(
            request,
            format_html(
                "{}: reset #{} applied, {} queue{} moved ({} message{} to consume again, {} "
                'skipped). <a href="{}">Undo reset #{}…</a>',
                group,
                reset.pk,
                f"{reset.moved:,}",
                _s(reset.moved),
                f"{reset.consumed_again:,}",
                _s(reset.consumed_again),
                f"{reset.skipped:,}",
                undo,
                reset.pk,
            ),
        )
    return redirect(back)


@post_only(lambda: reverse("groups:list"))
def reset_selected(request: HttpRequest) -> HttpResponse:
    """The form, the preview or the apply of a reset of the selected groups (the module)."""
    if request.POST.get("step") == "apply":
        return _apply(request)
    groups = _chosen(request.POST.getlist("groups"), "group")
    if isinstance(groups, str):
        messages.error(request, f"{groups} Nothing was changed.")
        return redirect(reverse("groups:list"))
    refusal = _refusal(request, groups)
    if refusal is not None:
        return refusal
    store = get_store()
    not_known = unknown(store, groups)
    if not_known:
        messages.error(request, unknown_sentence(not_known))
        return redirect(reverse("groups:list"))
    if request.POST.get("step") == "preview":
        return _preview(request, store, groups)
    topics = _common_topics(store, groups)
    if not topics:
        messages.error(
            request,
            f"The groups {_listing(groups)} consume no topic in common: reset them one by "
            "one, or select groups of one topic.",
        )
        return redirect(reverse("groups:list"))
    return _form_page(request, groups, ResetForm(topics=topics))
