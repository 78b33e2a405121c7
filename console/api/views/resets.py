"""API: offset resets of a group, their list, and their undo.

- ``/api/v1/groups/<group>/reset/``: POST (operator), in two steps: ``dry_run`` true (the
  default) previews a reset in one of the modes of ``storeadapter.reset_modes`` and
  answers with the plan and its ``token``; ``dry_run`` false with ``plan: <token>``
  applies that preview on the group as it is then (absolute modes set the previewed
  targets, a shift is taken from the offsets at that moment) and answers with the real
  before → after of every queue moved and the reset's id.
- ``/api/v1/groups/<group>/resets/``: GET the group's applied resets, newest first;
  ``resets/<id>/``: GET one, with what it replaced.
- ``/api/v1/groups/<group>/resets/<id>/undo/``: POST (operator), the undo of reset
  ``<id>``, previewed and applied in the same two steps.

- ``/api/v1/selected/groups/reset/``: POST (operator) resets several groups to the same
  target, as the group list's "Reset selected…" does (its rule: console.groups.
  bulk_reset): ``groups`` and a reset's preview body answer one preview for all (each
  group's plan under its own token; a group the user may not reset refuses it whole,
  403); ``dry_run`` false with ``plans`` (the tokens) applies them: one reset, one undo
  and one audit row per group, the answer saying per group what was applied or why not.

A preview is refused when applied only if it no longer means what it said (409
``preview_outdated``, with the request that previews it again), expired (400
``preview_expired``) or is unknown (404 ``preview_not_found``). Request bodies are
validated by serializers built from the modes' table, which also give the schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.roles import OPERATOR
from console.api.errors import ApiError
from console.api.names import NAME_PATTERN, PATH_NAME_PATTERN
from console.api.pagination import Pagination, paginated
from console.api.read_models import (
    AppliedResetDetailSerializer,
    AppliedResetSerializer,
    ResetAppliedSerializer,
    ResetPlanSerializer,
    SelectedResetAppliedSerializer,
    SelectedResetPreviewSerializer,
)
from console.api.rules import Rule, RulesSchema, only, value_check
from console.api.serializers import StrictSerializer, refusals, validated
from console.core.store import get_store
from console.groups import bulk_reset
from console.groups.detail import live_members
from console.groups.models import ResetPreview
from console.groups.resets import (
    PreviewExpiredError,
    ResetDetail,
    ResetEntry,
    applied_reset,
    applied_resets,
    keep_preview,
    kept_view,
    preview_undo_of,
)
from console.operations import groups as operations
from console.operations.groups import require_group
from storeadapter.engine import QueueNotFoundError
from storeadapter.offset_reset import (
    ResetOutdatedError,
    ResetPlan,
    preview_reset,
)
from storeadapter.reset_modes import (
    MAX_NAMED_QUEUES,
    MAX_OFFSET,
    MAX_SHIFT,
    MAX_TIME_MS,
    MODE_NAMES,
    MODES_BY_NAME,
    RESET_MODES,
    UNDO,
    ResetMode,
)
from storeadapter.summaries import group_summary

#: A preview's token (console.groups.resets.keep_preview).
TOKEN_PATTERN = r"^[0-9a-f]{16}$"
_APPLY_ONLY = "Applying takes only the plan token: the preview fixed the rest."


# ------------------------------------------------------------------- requests


#: A queue id as a key of ``offsets``: digits, at most 9.
QUEUE_ID_KEY = re.compile(r"[0-9]{1,9}")


@value_check("queue_ids")
def _queue_ids(offsets: Any) -> str | None:
    for queue in offsets if isinstance(offsets, dict) else ():
        if not isinstance(queue, str) or not QUEUE_ID_KEY.fullmatch(queue):
            return f"{str(queue)[:40]!r} is not a queue id."
    return None


#: The keys of ``offsets`` (OpenAPI 3.0 cannot say them: it has no propertyNames).
QUEUE_IDS = Rule.checked(
    "offsets", check="queue_ids", message="The keys of offsets are queue ids (0 to 999999999)."
)


#: How many queues ``offsets`` names (QueueOffsetsField), as JSON Schema over a body.
OFFSETS_COUNT = {"properties": {"offsets": {"minProperties": 1, "maxProperties": MAX_NAMED_QUEUES}}}


class QueueOffsetsField(serializers.DictField):
    """``{"<queue>": offset}``: queue ids as keys (the QUEUE_IDS rule), whole numbers ≥ 0 as
    values."""

    child = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            if not data:
                raise serializers.ValidationError("Give an offset for at least one queue.")
            if len(data) > MAX_NAMED_QUEUES:
                raise serializers.ValidationError(f"At most {MAX_NAMED_QUEUES} queues at once.")
            for queue, offset in data.items():
                if not isinstance(offset, int) or isinstance(offset, bool):
                    raise serializers.ValidationError(
                        f"The offset for queue {queue} must be a whole number."
                    )
        return super().to_internal_value(data)


#: The request field for each kind of value a mode takes (named by the mode's
#: ``api_field``).
_VALUE_FIELDS: dict[str, Callable[[], serializers.Field]] = {
    "offsets": lambda: QueueOffsetsField(help_text='{"<queue>": offset}; other queues stay.'),
    "time": lambda: serializers.IntegerField(
        min_value=0, max_value=MAX_TIME_MS, help_text="Milliseconds since the epoch."
    ),
    "shift": lambda: serializers.IntegerField(
        min_value=-MAX_SHIFT,
        max_value=MAX_SHIFT,
        help_text="Negative: consume again; positive: skip.",
    ),
    "group": lambda: serializers.RegexField(
        PATH_NAME_PATTERN, max_length=127, help_text="The group whose offsets to take."
    ),
}


def _value_field(mode: ResetMode) -> tuple[str, serializers.Field] | None:
    """The request field that carries the mode's value, if it takes one."""
    if mode.api_field is None:
        return None
    return mode.api_field, _VALUE_FIELDS[mode.takes]()


def _preview_request(mode: ResetMode) -> type[StrictSerializer]:
    """The body that previews a reset in ``mode``: topic, mode, and its value's field."""
    fields: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"Preview a reset to {mode.name}: {mode.description}",
        "unknown_messages": {
            "plan": "A plan token is applied with dry_run false; drop it to preview."
        },
        "topic": serializers.RegexField(NAME_PATTERN, max_length=140),
        "mode": serializers.ChoiceField(choices=[mode.name]),
        "dry_run": serializers.BooleanField(
            default=True, help_text="True (the default): only preview, and keep the preview."
        ),
        "body_constraints": (only("dry_run", True),),
    }
    value = _value_field(mode)
    if value is not None:
        fields[value[0]] = value[1]
    if mode.takes == "offsets":
        fields["cross_field_rules"] = (QUEUE_IDS,)
        fields["body_constraints"] = (*fields["body_constraints"], OFFSETS_COUNT)
    name = "".join(part.capitalize() for part in mode.name.split("_"))
    return type(f"{name}ResetPreview", (StrictSerializer,), fields)


#: The body previewing each mode, by mode name.
PREVIEW_REQUESTS = {mode.name: _preview_request(mode) for mode in RESET_MODES}


class ResetModeRequest(StrictSerializer):
    """Only to say what is wrong with a body whose mode is missing or unknown."""

    mode = serializers.ChoiceField(choices=list(MODE_NAMES))

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            data = {"mode": data["mode"]} if "mode" in data else {}
        return super().to_internal_value(data)


class ApplyPreview(StrictSerializer):
    """Apply a kept preview, exactly as previewed."""

    unknown_messages = dict.fromkeys(("topic", "mode", "value", "offsets", "source"), _APPLY_ONLY)

    dry_run = serializers.BooleanField(help_text="False: apply the preview named by plan.")
    plan = serializers.RegexField(
        TOKEN_PATTERN,
        help_text="The token of the preview to apply.",
        error_messages={
            "required": "Preview first (dry_run true), then apply with dry_run false and "
            "plan set to the preview's token."
        },
    )

    body_constraints = (only("dry_run", False),)

    def validate_dry_run(self, value: bool) -> bool:
        if value:
            raise serializers.ValidationError("dry_run is false to apply a preview.")
        return value


class UndoPreview(StrictSerializer):
    """Preview the undo of the reset (an empty body does too)."""

    unknown_messages = {"plan": "A plan token is applied with dry_run false; drop it to preview."}

    dry_run = serializers.BooleanField(
        default=True, help_text="True (the default): only preview, and keep the preview."
    )

    body_constraints = (only("dry_run", True),)


def _preview_or_apply(data: Any, apply: type, previews: dict[str, type]) -> dict:
    """The validated body of a reset POST: ``apply`` when dry_run is false, else the
    preview serializer of its mode in ``previews`` (an unknown mode refused by
    ResetModeRequest, with the modes listed)."""
    if isinstance(data, dict) and data.get("dry_run") is False:
        return validated(apply, data)
    mode = data.get("mode") if isinstance(data, dict) else None
    request = previews.get(mode) if isinstance(mode, str) else None
    if request is None:
        validated(ResetModeRequest, data)
    return validated(request, data)


def _reset_request(data: Any) -> dict:
    """The validated body of a reset POST: a preview in some mode, or an apply."""
    return _preview_or_apply(data, ApplyPreview, PREVIEW_REQUESTS)


def _undo_request(data: Any) -> dict:
    if isinstance(data, dict) and data.get("dry_run") is False:
        return validated(ApplyPreview, data)
    return validated(UndoPreview, data)


RESET_REQUEST = PolymorphicProxySerializer(
    component_name="ResetRequest",
    serializers=[*PREVIEW_REQUESTS.values(), ApplyPreview],
    resource_type_field_name=None,
)
UNDO_REQUEST = PolymorphicProxySerializer(
    component_name="UndoRequest",
    serializers=[UndoPreview, ApplyPreview],
    resource_type_field_name=None,
)


#: The views' schema class (console.api.rules.RulesSchema says "one of" bodies required).
BodySchema = RulesSchema


# ------------------------------------------------------------------- answers


PREVIEW_OR_APPLIED = OpenApiResponse(
    PolymorphicProxySerializer(
        component_name="ResetPreviewOrApplied",
        serializers=[ResetPlanSerializer, ResetAppliedSerializer],
        resource_type_field_name=None,
    ),
    description="dry_run true: the preview, kept under its token; false: what was applied.",
)


#: Applying a preview refused as outdated (its details say how to preview again).
OUTDATED = refusals(
    (
        409,
        "The preview no longer means what it said (preview_outdated), or the consumers "
        "committed between every read and commit of a shift (offsets_moved).",
    )
)


def _preview_answer(plan: ResetPlan) -> Response:
    """Keep ``plan`` and answer with its view, the token and the group's live members."""
    live = len(live_members(get_store(), plan.group))
    return Response(ResetPlanSerializer(kept_view(plan, keep_preview(plan), live)).data)


def _preview_again(group: str, token: str) -> dict:
    """The request that previews a refused preview again, as ``details.preview_again``."""
    plan = ResetPlan.from_dict(ResetPreview.objects.get(token=token, group=group).plan)
    if plan.mode == UNDO:
        return {"path": f"/api/v1/groups/{group}/resets/{plan.value}/undo/", "body": {}}
    body: dict[str, Any] = {"topic": plan.topic, "mode": plan.mode}
    field = MODES_BY_NAME[plan.mode].api_field
    if field is not None:
        body[field] = plan.value
    return {"path": f"/api/v1/groups/{group}/reset/", "body": body}


def _apply(request: Request, group: str, token: str, undoing: int | bool) -> Response:
    try:
        applied = operations.apply_kept_preview(request.user, group, token, undoing)
    except ResetOutdatedError as error:
        raise ApiError(
            409,
            "preview_outdated",
            f"The preview no longer means what it said: {error}. Nothing was changed; "
            "preview again with the request in details.preview_again.",
            {"preview_again": _preview_again(group, token)},
        ) from None
    except PreviewExpiredError as error:
        raise ApiError(
            400,
            "preview_expired",
            f"{str(error)[:1].upper()}{str(error)[1:]}: preview again with the request in "
            "details.preview_again and apply the new token.",
            {"preview_again": _preview_again(group, token)},
        ) from None
    return Response(ResetAppliedSerializer(applied.view()).data)


# ------------------------------------------------------------------------ views


class GroupReset(APIView):
    """Preview a reset of the group's offsets on one topic, or apply a kept preview."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(request=RESET_REQUEST, responses={200: PREVIEW_OR_APPLIED, **OUTDATED})
    def post(self, request: Request, group: str) -> Response:
        data = _reset_request(request.data)
        if not data["dry_run"]:
            return _apply(request, group, data["plan"], undoing=False)
        copying = data["mode"] == "group"
        if not copying:  # a copy may create the group
            require_group(group)
        store = get_store()
        topic = data["topic"]
        info = store.topic(topic)  # TopicNotFoundError: 404
        topics = group_summary(store, group).topics
        if topic not in topics and not copying:
            raise ApiError(
                404,
                "topic_not_consumed",
                f"Group {group!r} has no offsets on topic {topic!r}, so there is nothing to "
                f"reset there; its topics: {', '.join(topics) or 'none'}.",
            )
        plan = preview_reset(store, group, topic, data["mode"], _mode_value(data, info))
        return _preview_answer(plan)


def _mode_value(data: dict, info: Any) -> Any:
    """The value a validated preview body gives its mode (offsets by queue id, checked
    against the topic ``info``'s queues: QueueNotFoundError)."""
    field = MODES_BY_NAME[data["mode"]].api_field
    value: Any = None if field is None else data[field]
    if data["mode"] == "offset":
        value = {int(queue): offset for queue, offset in data["offsets"].items()}
        missing = sorted(queue for queue in value if queue >= info.queues)
        if missing:
            raise QueueNotFoundError(
                f"topic {info.name!r} has queues 0 to {info.queues - 1}, not {missing[0]}"
            )
    return value


# --------------------------------------------------------------- selected groups


def _selected_groups() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.RegexField(PATH_NAME_PATTERN, max_length=127),
        min_length=1,
        max_length=bulk_reset.MAX_SELECTED,
        help_text=f"The groups to reset, 1 to {bulk_reset.MAX_SELECTED} (each once; in this "
        "order), each with offsets on the topic.",
    )


def _selected_preview_request(mode_request: type[StrictSerializer]) -> type[StrictSerializer]:
    """``mode_request`` (a group's preview body) with the groups selected."""
    return type(
        f"Selected{mode_request.__name__}",
        (mode_request,),
        {
            "__module__": __name__,
            "__doc__": f"{mode_request.__doc__} For each group selected.",
            "unknown_messages": {
                "plans": "Plan tokens are applied with dry_run false; drop them to preview."
            },
            "groups": _selected_groups(),
        },
    )


#: The body previewing a reset of the selected groups in each mode, by mode name.
SELECTED_PREVIEW_REQUESTS = {
    name: _selected_preview_request(request) for name, request in PREVIEW_REQUESTS.items()
}


class ApplySelected(StrictSerializer):
    """Apply the previews of the selected groups, each exactly as previewed."""

    unknown_messages = dict.fromkeys(
        ("groups", "topic", "mode", "value", "offsets", "source"), _APPLY_ONLY
    )

    dry_run = serializers.BooleanField(help_text="False: apply the previews named by plans.")
    plans = serializers.ListField(
        child=serializers.RegexField(TOKEN_PATTERN),
        min_length=1,
        max_length=bulk_reset.MAX_SELECTED,
        help_text="The tokens of the previews to apply (the selected preview's).",
    )

    body_constraints = (only("dry_run", False),)

    def validate_dry_run(self, value: bool) -> bool:
        if value:
            raise serializers.ValidationError("dry_run is false to apply previews.")
        return value


def _selected_request(data: Any) -> dict:
    """The validated body of a selected groups' reset: one preview for all, or an apply."""
    return _preview_or_apply(data, ApplySelected, SELECTED_PREVIEW_REQUESTS)


SELECTED_RESET_REQUEST = PolymorphicProxySerializer(
    component_name="SelectedResetRequest",
    serializers=[*SELECTED_PREVIEW_REQUESTS.values(), ApplySelected],
    resource_type_field_name=None,
)


def _refuse_groups(request: Request, groups: list[str]) -> None:
    not_allowed = bulk_reset.refused(request.user, groups)
    if not_allowed:
        raise ApiError(403, "permission_denied", bulk_reset.refusal_sentence(not_allowed))


class GroupResets(APIView):
    @extend_schema(
        operation_id="v1_groups_resets_list", responses={200: paginated(AppliedResetSerializer)}
    )
    def get(self, request: Request, group: str) -> Response:
        require_group(group)
        paginator = Pagination()
        resets = applied_resets(group).prefetch_related("undone_by")
        page = paginator.paginate_queryset(resets, request, view=self)
        return paginator.get_paginated_response(
            AppliedResetSerializer([ResetEntry.of(r) for r in page], many=True).data
        )


class GroupResetDetail(APIView):
    @extend_schema(responses={200: AppliedResetDetailSerializer})
    def get(self, request: Request, group: str, reset: int) -> Response:
        require_group(group)
        return Response(
            AppliedResetDetailSerializer(ResetDetail.of(applied_reset(group, reset))).data
        )


class GroupResetUndo(APIView):
    """Preview the undo of an applied reset, or apply a kept preview of it."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(request=UNDO_REQUEST, responses={200: PREVIEW_OR_APPLIED, **OUTDATED})
    def post(self, request: Request, group: str, reset: int) -> Response:
        data = _undo_request(request.data)
        if not data["dry_run"]:
            return _apply(request, group, data["plan"], undoing=reset)
        require_group(group)
        plan = preview_undo_of(get_store(), applied_reset(group, reset))
        return _preview_answer(plan)


class SelectedGroupsReset(APIView):
    """Preview a reset of several groups to the same target (one preview for all), or
    apply their kept previews (one reset and one undo per group); per-group results."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(
        request=SELECTED_RESET_REQUEST,
        responses={
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="SelectedResetPreviewOrApplied",
                    serializers=[SelectedResetPreviewSerializer, SelectedResetAppliedSerializer],
                    resource_type_field_name=None,
                ),
                description="dry_run true: the preview of each group, kept under its token; "
                "false: what was applied to each group, or why not.",
            ),
            **refusals(
                (
                    404,
                    "A group or topic is not there, a group has no offsets on the topic, "
                    "or a preview is not kept (applied already, or never made).",
                ),
                (409, "A group's reset cannot be previewed (nothing was previewed)."),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = _selected_request(request.data)
        if not data["dry_run"]:
            return self._apply(request, list(dict.fromkeys(data["plans"])))
        groups = bulk_reset.selection(data["groups"])
        if isinstance(groups, str):
            raise ApiError(400, "invalid", groups, {"fields": {"groups": [groups]}})
        _refuse_groups(request, groups)
        store = get_store()
        not_known = bulk_reset.unknown(store, groups)
        if not_known:
            raise ApiError(404, "not_found", bulk_reset.unknown_sentence(not_known))
        topic = data["topic"]
        info = store.topic(topic)  # TopicNotFoundError: 404
        elsewhere = bulk_reset.not_consuming(store, groups, topic)
        if elsewhere:
            raise ApiError(
                404,
                "topic_not_consumed",
                f"The groups {', '.join(elsewhere)} have no offsets on topic {topic!r}: reset "
                "selected groups on a topic they all consume; nothing was previewed.",
            )
        try:
            shown = bulk_reset.preview_each(
                store, groups, topic, data["mode"], _mode_value(data, info)
            )
        except bulk_reset.PreviewRefused as refusal:
            raise ApiError(409, "preview_refused", str(refusal), {"group": refusal.group}) from None
        views = [
            kept_view(p.plan, p.kept, len(live_members(store, p.group)))
            for p in shown
            if p.kept is not None
        ]
        answer = {
            "topic": topic,
            "mode": data["mode"],
            "groups": len(shown),
            "moved": sum(p.plan.moved for p in shown),
            "consumed_again": sum(p.plan.consumed_again for p in shown),
            "skipped": sum(p.plan.skipped for p in shown),
            "clamped": sum(p.plan.clamped for p in shown),
            "previews": views,
        }
        return Response(SelectedResetPreviewSerializer(answer).data)

    def _apply(self, request: Request, tokens: list[str]) -> Response:
        kept, missing = bulk_reset.kept_groups(tokens)
        if missing:
            raise ApiError(404, "preview_not_found", bulk_reset.missing_tokens_sentence(missing))
        _refuse_groups(request, list(dict.fromkeys(kept[token] for token in tokens)))
        results = []
        for outcome in bulk_reset.apply_each(request.user, tokens, kept):
            applied = outcome.applied
            view = applied.view() if applied is not None else None
            reset_id = view.reset_id if view is not None else None
            results.append(
                {
                    "group": outcome.group,
                    "plan": outcome.token,
                    "applied": applied is not None,
                    "reset_id": reset_id,
                    "undo": None
                    if reset_id is None
                    else f"/api/v1/groups/{outcome.group}/resets/{reset_id}/undo/",
                    "changed": view.changed if view is not None else 0,
                    "consumed_again": view.consumed_again if view is not None else 0,
                    "skipped": view.skipped if view is not None else 0,
                    "error": outcome.error,
                }
            )
        done = sum(1 for each in results if each["applied"])
        answer = {"applied": done, "failed": len(results) - done, "results": results}
        return Response(SelectedResetAppliedSerializer(answer).data)


urlpatterns = [
    path(
        "selected/groups/reset/",
        SelectedGroupsReset.as_view(),
        name="api-selected-groups-reset",
    ),
    path("groups/<name:group>/reset/", GroupReset.as_view(), name="api-group-reset"),
    path("groups/<name:group>/resets/", GroupResets.as_view(), name="api-group-resets"),
    path(
        "groups/<name:group>/resets/<int:reset>/",
        GroupResetDetail.as_view(),
        name="api-group-reset-detail",
    ),
    path(
        "groups/<name:group>/resets/<int:reset>/undo/",
        GroupResetUndo.as_view(),
        name="api-group-reset-undo",
    ),
]
