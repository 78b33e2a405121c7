"""API: consumer groups, their lag, offset resets and undos, history, dead letters.

- ``/api/v1/groups/``: GET list (``q`` name contains, ``topic`` has offsets on it), most
  behind first.
- ``/api/v1/groups/<group>/``: GET lag per queue with owners and last commits, the live
  members; DELETE forgets the group (admin).
- ``/api/v1/groups/<group>/reset/``: POST (operator), in two steps: ``dry_run`` true (the
  default) previews a reset and answers with the plan and its ``token``; ``dry_run`` false
  with ``plan: <token>`` applies exactly that preview, or changes nothing: 409
  ``offsets_moved`` if the group's offsets moved since, 404 ``preview_not_found`` for a
  token never saved (or applied already), 400 ``preview_expired`` after 30 minutes.
- ``/api/v1/groups/<group>/history/``: GET the offset changes, newest first.
- ``/api/v1/groups/<group>/undo/``: POST (operator), the undo of the latest reset on a
  topic, previewed and applied in the same two steps.
- ``/api/v1/groups/<group>/dlq/``: GET the dead letters; ``dlq/redrive/``: POST (operator)
  sends some or all back to their topics.
- ``/api/v1/groups/<group>/copy/``: POST (operator) gives the group another's offsets.

The figures are the group pages' own (console.groups.detail and .dlq); every change goes
through console.operations.groups, which writes the audit row.
"""

from __future__ import annotations

import re
from typing import Any

from django.urls import path
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.roles import ADMIN, OPERATOR
from console.api.errors import ApiError
from console.api.models import PREVIEW_LIFETIME
from console.api.names import NAME_PATTERN, PATH_NAME_PATTERN
from console.api.pagination import Pagination, paginated
from console.api.previews import keep_preview, kept_plan, kept_preview
from console.api.serializers import (
    QuerySerializer,
    StoredMessageSerializer,
    StrictSerializer,
    message_data,
    validated,
)
from console.core.store import get_store
from console.groups.detail import (
    filter_groups,
    group_detail,
    group_rows,
    latest_resets,
    reason_label,
)
from console.groups.dlq import DlqMessages, dead_letter_origin, dlq_exists
from console.groups.forms import MAX_OFFSET_LINES
from console.monitoring import scale
from console.monitoring.metrics import GROUP_STATUSES, QUEUE_STATUSES, GroupMetrics
from console.operations import groups as operations
from console.operations.groups import GroupNotFoundError, require_group
from storeadapter.engine import STATUS_DUPLICATE, OffsetChange, QueueNotFoundError, dlq_topic
from storeadapter.offset_reset import (
    LISTED_QUEUES,
    MODES,
    ResetError,
    ResetNotUndoableError,
    ResetPlan,
    preview_reset,
    preview_undo,
)
from storeadapter.summaries import group_summaries, group_summary

#: A group name in a body (the engine's rule, as in paths: no %RETRY%/%DLQ% prefix).
GROUP_NAME_PATTERN = PATH_NAME_PATTERN
#: The reset modes a client asks for (``undo`` has its own endpoint).
RESET_MODES = tuple(mode for mode in MODES if mode != "undo")
#: A shift moves at most this many messages either way (as on the page's form).
MAX_SHIFT = 10**12
#: The latest time a time reset takes: 9999-12-31T23:59:59.999Z.
MAX_TIME_MS = 253_402_300_799_999
MAX_OFFSET = 2**63 - 1
#: The most message ids one redrive takes; more at once is a redrive of ``all``.
MAX_REDRIVE_IDS = 100
QUEUE_ID_PATTERN = r"^[0-9]{1,4}$"
_QUEUE_ID = re.compile(r"[0-9]{1,4}")
#: A preview's token (ResetPlan.token).
TOKEN_PATTERN = r"^[0-9a-f]{16}$"
MESSAGE_ID_PATTERN = r"^[0-9A-Fa-f]{24}$"


# ------------------------------------------------------------------- serializers


class GroupSerializer(serializers.Serializer):
    group = serializers.CharField()
    lag = serializers.IntegerField(help_text="Messages behind, over all its queues.")
    topics = serializers.ListField(child=serializers.CharField())
    queues_behind = serializers.IntegerField(help_text="Queues with a lag above 0.")
    members = serializers.IntegerField(help_text="Live members (heartbeat within 10 s).")
    status = serializers.ChoiceField(
        choices=list(GROUP_STATUSES),
        allow_null=True,
        help_text="Burrow-style status from the latest metrics sample; null before one.",
    )


class GroupListQuery(QuerySerializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=200)
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)


class GroupQueueSerializer(serializers.Serializer):
    topic = serializers.CharField()
    queue = serializers.IntegerField()
    committed = serializers.IntegerField(allow_null=True, help_text="None: never committed.")
    max_offset = serializers.IntegerField()
    lag = serializers.IntegerField()
    owner = serializers.CharField(allow_null=True, help_text="The live member holding it.")
    last_commit_ms = serializers.IntegerField(allow_null=True)
    status = serializers.ChoiceField(
        choices=list(QUEUE_STATUSES), allow_null=True, help_text="From the latest sample."
    )
    lag_seconds = serializers.FloatField(allow_null=True, help_text="From the latest sample.")


class GroupMetricsSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(GROUP_STATUSES))
    sampled_ms = serializers.IntegerField()
    lag_seconds = serializers.FloatField(allow_null=True)
    consume_rate = serializers.FloatField(help_text="Messages per second.")
    produce_rate = serializers.FloatField(help_text="Messages per second.")
    drain_seconds = serializers.FloatField(allow_null=True, help_text="null: never (not draining).")
    expiry_risk_hours = serializers.FloatField(
        allow_null=True, help_text="Hours until retention deletes unconsumed messages; null: none."
    )


class MemberQueueSerializer(serializers.Serializer):
    topic = serializers.CharField()
    queue = serializers.IntegerField()


class GroupMemberSerializer(serializers.Serializer):
    consumer_id = serializers.CharField()
    pid = serializers.IntegerField()
    host = serializers.CharField(allow_blank=True)
    topics = serializers.ListField(child=serializers.CharField())
    queues = MemberQueueSerializer(many=True)
    started_ms = serializers.IntegerField()
    heartbeat_ms = serializers.IntegerField()
    heartbeat_age_ms = serializers.IntegerField()


class BigTopicLagSerializer(serializers.Serializer):
    topic = serializers.CharField()
    lag = serializers.IntegerField(allow_null=True, help_text="From the sampler; null: not yet.")
    queues_behind = serializers.IntegerField(allow_null=True)
    sampled_ms = serializers.IntegerField(allow_null=True, help_text="The sample's time.")
    queues = serializers.IntegerField(help_text="The topic's queues.")
    queue_page = serializers.IntegerField(help_text="The page of its queues in ``queues``.")
    queue_pages = serializers.IntegerField()


class GroupDetailQuery(QuerySerializer):
    topic = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="A big topic whose page ``queue_page`` of queues to list.",
    )
    queue_page = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)


class GroupDetailSerializer(serializers.Serializer):
    group = serializers.CharField()
    lag = serializers.IntegerField()
    topics = serializers.ListField(child=serializers.CharField())
    queues = GroupQueueSerializer(
        many=True,
        help_text="Every queue of its topics; of a big topic (see big_topics), one page.",
    )
    big_topics = BigTopicLagSerializer(
        many=True,
        help_text="Topics with too many queues to read per request: their lag is the "
        "sampler's and ``queues`` holds one page of theirs (``?topic=&queue_page=``).",
    )
    members = GroupMemberSerializer(many=True)
    has_dlq = serializers.BooleanField(help_text="Whether the group has a DLQ topic.")
    status = serializers.ChoiceField(choices=list(GROUP_STATUSES), allow_null=True)
    metrics = GroupMetricsSerializer(allow_null=True, help_text="null before the first sample.")


class QueueOffsetsField(serializers.DictField):
    """``{"<queue>": offset}``: queue ids as keys, whole numbers ≥ 0 as values."""

    child = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            if not data:
                raise serializers.ValidationError("Give an offset for at least one queue.")
            if len(data) > MAX_OFFSET_LINES:
                raise serializers.ValidationError(f"At most {MAX_OFFSET_LINES} queues at once.")
            for queue, offset in data.items():
                if not isinstance(queue, str) or not _QUEUE_ID.fullmatch(queue):
                    raise serializers.ValidationError(f"{queue!r} is not a queue id.")
                if not isinstance(offset, int) or isinstance(offset, bool):
                    raise serializers.ValidationError(
                        f"The offset for queue {queue} must be a whole number."
                    )
        return super().to_internal_value(data)


class TwoStepRequest(StrictSerializer):
    """A preview (``dry_run`` true, the default) or the apply of a saved one (``dry_run``
    false and its token as ``plan``, nothing else)."""

    #: The fields a preview takes (refused when applying), and those it needs.
    preview_fields: tuple[str, ...] = ("topic",)
    preview_needs: tuple[str, ...] = ("topic",)

    dry_run = serializers.BooleanField(default=True)
    plan = serializers.RegexField(TOKEN_PATTERN, required=False)

    def validate(self, data: dict) -> dict:
        if data["dry_run"]:
            if "plan" in data:
                raise serializers.ValidationError(
                    {"plan": ["A plan token is applied with dry_run false; drop it to preview."]}
                )
            missing = [name for name in self.preview_needs if name not in data]
            if missing:
                raise serializers.ValidationError(
                    {name: ["This field is required for a preview."] for name in missing}
                )
            return data
        given = [name for name in self.preview_fields if name in self.initial_data]
        if given:
            raise serializers.ValidationError(
                {
                    name: ["Applying takes only the plan token: the preview fixed the rest."]
                    for name in given
                }
            )
        return data


class ResetOffsets(TwoStepRequest):
    preview_fields = ("topic", "mode", "value", "offsets")
    preview_needs = ("topic", "mode")

    topic = serializers.RegexField(NAME_PATTERN, max_length=140, required=False)
    mode = serializers.ChoiceField(choices=list(RESET_MODES), required=False)
    value = serializers.IntegerField(required=False, min_value=-MAX_SHIFT, max_value=MAX_TIME_MS)
    offsets = QueueOffsetsField(required=False)

    def validate(self, data: dict) -> dict:
        data = super().validate(data)
        if not data["dry_run"]:
            return data
        mode = data["mode"]
        if mode in ("time", "shift"):
            if "value" not in data:
                raise serializers.ValidationError({"value": [f"A {mode} reset needs a value."]})
            if mode == "time" and data["value"] < 0:
                raise serializers.ValidationError(
                    {"value": ["A time is milliseconds since the epoch, 0 or more."]}
                )
            if mode == "shift" and data["value"] > MAX_SHIFT:
                raise serializers.ValidationError(
                    {"value": [f"A shift is at most {MAX_SHIFT} either way."]}
                )
        elif "value" in data:
            raise serializers.ValidationError(
                {"value": [f"A value is for time and shift resets, not {mode}."]}
            )
        if mode == "offset" and "offsets" not in data:
            raise serializers.ValidationError({"offsets": ["An offset reset needs offsets."]})
        if mode != "offset" and "offsets" in data:
            raise serializers.ValidationError(
                {"offsets": [f"Offsets are for an offset reset, not {mode}."]}
            )
        return data


class UndoReset(TwoStepRequest):
    topic = serializers.RegexField(NAME_PATTERN, max_length=140, required=False)


class StrictStringList(serializers.ListField):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and any(not isinstance(item, str) for item in data):
            raise serializers.ValidationError("Message ids are strings.")
        return super().to_internal_value(data)


class Redrive(StrictSerializer):
    message_ids = StrictStringList(
        child=serializers.RegexField(MESSAGE_ID_PATTERN),
        required=False,
        min_length=1,
        max_length=MAX_REDRIVE_IDS,
    )
    all = serializers.BooleanField(required=False)

    def validate(self, data: dict) -> dict:
        if "message_ids" in data and "all" in data:
            raise serializers.ValidationError("Send message_ids or all, not both.")
        if "message_ids" not in data and not data.get("all"):
            raise serializers.ValidationError(
                f"Send message_ids (1 to {MAX_REDRIVE_IDS} ids) or all: true to redrive "
                "every dead letter."
            )
        return data


class CopyOffsets(StrictSerializer):
    """The group to copy committed offsets from."""

    source = serializers.RegexField(
        GROUP_NAME_PATTERN,
        max_length=140,
        help_text="The group whose committed offsets to copy.",
    )


# The bodies of the two-step and redrive POSTs, as the serializers above accept them: one
# of a few shapes each (drf-spectacular cannot derive "one of" from a serializer).


def _body(title: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "object",
        "title": title,
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_TOPIC = {"type": "string", "pattern": NAME_PATTERN, "maxLength": 140}
_PREVIEW = {
    "type": "boolean",
    "enum": [True],
    "default": True,
    "description": "True (the default): only preview, and save the preview for an apply.",
}
_APPLY = _body(
    "Apply a saved preview, exactly as previewed",
    {
        "dry_run": {"type": "boolean", "enum": [False]},
        "plan": {
            "type": "string",
            "pattern": TOKEN_PATTERN,
            "description": "The token of the preview to apply.",
        },
    },
    ["dry_run", "plan"],
)


def _reset_preview(title: str, modes: list[str], extra: dict | None = None) -> dict:
    properties = {"topic": _TOPIC, "mode": {"type": "string", "enum": modes}, "dry_run": _PREVIEW}
    properties.update(extra or {})
    return _body(title, properties, ["topic", "mode", *(extra or {})])


RESET_BODY = {
    "oneOf": [
        _reset_preview("Preview a reset to the earliest or latest offset", ["earliest", "latest"]),
        _reset_preview(
            "Preview a reset to given offsets (other queues stay)",
            ["offset"],
            {
                "offsets": {
                    "type": "object",
                    "description": '{"<queue>": offset}: each key a queue id (digits)',
                    # OpenAPI 3.0 has no patternProperties: the view checks the keys.
                    "additionalProperties": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_OFFSET,
                    },
                    "minProperties": 1,
                    "maxProperties": MAX_OFFSET_LINES,
                }
            },
        ),
        _reset_preview(
            "Preview a reset to a time: the first message stored then or later",
            ["time"],
            {
                "value": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_TIME_MS,
                    "description": "Milliseconds since the epoch.",
                }
            },
        ),
        _reset_preview(
            "Preview a shift by ±N messages from the committed offsets",
            ["shift"],
            {
                "value": {
                    "type": "integer",
                    "minimum": -MAX_SHIFT,
                    "maximum": MAX_SHIFT,
                    "description": "Negative: consume again; positive: skip.",
                }
            },
        ),
        _APPLY,
    ]
}
UNDO_BODY = {
    "oneOf": [
        _body(
            "Preview the undo of the latest reset on a topic",
            {"topic": _TOPIC, "dry_run": _PREVIEW},
            ["topic"],
        ),
        _APPLY,
    ]
}
REDRIVE_BODY = {
    "oneOf": [
        _body(
            "Redrive the dead letters with these ids",
            {
                "message_ids": {
                    "type": "array",
                    "items": {"type": "string", "pattern": MESSAGE_ID_PATTERN},
                    "minItems": 1,
                    "maxItems": MAX_REDRIVE_IDS,
                }
            },
            ["message_ids"],
        ),
        _body("Redrive every dead letter", {"all": {"type": "boolean", "enum": [True]}}, ["all"]),
    ]
}


class QueueResetSerializer(serializers.Serializer):
    queue = serializers.IntegerField()
    committed = serializers.IntegerField(allow_null=True, help_text="None: never committed.")
    current = serializers.IntegerField(help_text="Where the group consumes from now.")
    target = serializers.IntegerField()
    min_offset = serializers.IntegerField()
    max_offset = serializers.IntegerField()
    clamped = serializers.CharField(
        allow_null=True, help_text="Why the target was moved into the queue's range."
    )
    span_from_ms = serializers.IntegerField(allow_null=True)
    span_to_ms = serializers.IntegerField(allow_null=True)
    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()


class ResetPlanSerializer(serializers.Serializer):
    group = serializers.CharField()
    topic = serializers.CharField()
    mode = serializers.CharField(help_text="earliest, latest, offset, time, shift or undo.")
    value = serializers.JSONField(
        allow_null=True,
        help_text="time: ms; shift: N; offset: the offsets asked for; undo: the reset undone.",
    )
    queues = QueueResetSerializer(
        many=True,
        help_text="Every queue of the topic; of a topic with more than 1,000 queues, the "
        "first 1,000 that move (listed_all false; the counts cover every queue).",
    )
    queue_count = serializers.IntegerField(help_text="Queues of the topic.")
    listed_all = serializers.BooleanField(help_text="Whether queues lists every queue.")
    span_from_ms = serializers.IntegerField(allow_null=True, help_text="Over the listed queues.")
    span_to_ms = serializers.IntegerField(allow_null=True, help_text="Over the listed queues.")
    token = serializers.CharField(help_text="Apply with dry_run false and this as plan.")
    changes = serializers.IntegerField(help_text="Queues whose offset would move.")
    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()
    clamped = serializers.IntegerField(
        help_text="Queues whose target was moved into their range (of a big topic: of "
        "those that move)."
    )
    undoable = serializers.BooleanField(
        help_text="Whether undo/ can take it back: false when it moves more queues than "
        "the group's offset history keeps."
    )
    expires_ms = serializers.IntegerField(help_text="Until when the preview can be applied.")


class OffsetChangeSerializer(serializers.Serializer):
    topic = serializers.CharField()
    queue = serializers.IntegerField()
    old = serializers.IntegerField(allow_null=True)
    new = serializers.IntegerField()
    time_ms = serializers.IntegerField()
    who = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)


class ResetAppliedSerializer(serializers.Serializer):
    group = serializers.CharField()
    topic = serializers.CharField()
    mode = serializers.CharField(help_text="earliest, latest, offset, time, shift or undo.")
    token = serializers.CharField()
    changed = serializers.IntegerField(help_text="Queues whose offset moved.")
    changes = OffsetChangeSerializer(many=True, help_text="The first 1,000 of them.")
    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()


class HistoryEntrySerializer(OffsetChangeSerializer):
    label = serializers.CharField(allow_blank=True, help_text="The reason, for people.")
    undoable = serializers.BooleanField(
        help_text="Part of the latest reset on its topic: what undo/ takes back."
    )


class HistoryQuery(QuerySerializer):
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)
    queue = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


class DeadLetterSerializer(StoredMessageSerializer):
    """A dead letter: the message as stored in the DLQ, where it came from, and why it died."""

    origin_topic = serializers.CharField(allow_null=True)
    origin_queue = serializers.IntegerField(allow_null=True)
    origin_offset = serializers.IntegerField(allow_null=True)
    origin_message_id = serializers.CharField(allow_null=True)
    retry_count = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField(allow_blank=True)


class RedrivenSerializer(serializers.Serializer):
    message_id = serializers.CharField()
    topic = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    duplicate = serializers.BooleanField(help_text="Redriven before, so not sent again.")


class RedriveResultSerializer(serializers.Serializer):
    redriven = serializers.IntegerField(help_text="Dead letters handled.")
    sent = serializers.IntegerField(help_text="Appended to their topics now.")
    duplicates = serializers.IntegerField(help_text="Redriven before, not sent again.")
    messages = RedrivenSerializer(many=True)


class CopyResultSerializer(serializers.Serializer):
    source = serializers.CharField()
    target = serializers.CharField()
    changes = OffsetChangeSerializer(many=True)


#: What a two-step POST answers: the preview (dry_run true) or what was applied.
PREVIEW_OR_APPLIED = OpenApiResponse(
    PolymorphicProxySerializer(
        component_name="ResetPreviewOrApplied",
        serializers=[ResetPlanSerializer, ResetAppliedSerializer],
        resource_type_field_name=None,
    ),
    description="dry_run true: the preview, saved under its token; false: what was applied.",
)


class BodySchema(AutoSchema):
    """Request bodies given as raw schemas (the "one of" bodies above) are required:
    drf-spectacular marks only serializer bodies with required fields so."""

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        return schema, required or isinstance(serializer, dict)


# ------------------------------------------------------------------------ helpers


def _change_data(change: OffsetChange) -> dict:
    return {
        "topic": change.topic,
        "queue": change.queue,
        "old": change.old,
        "new": change.new,
        "time_ms": change.time_ms,
        "who": change.who,
        "reason": change.reason,
    }


def _plan_data(plan: ResetPlan, saved_at) -> dict:
    expires = saved_at + PREVIEW_LIFETIME
    data = plan.as_dict()
    for internal in ("moves", "total_queues", "clamped_total"):
        data.pop(internal, None)
    return {
        **data,
        "queue_count": plan.queue_count,
        "listed_all": plan.listed_all,
        "changes": plan.moved,
        "consumed_again": plan.consumed_again,
        "skipped": plan.skipped,
        "clamped": plan.clamped,
        "expires_ms": int(expires.timestamp() * 1000),
    }


def _save_preview(plan: ResetPlan) -> Response:
    """Keep the plan under its token for a later apply; answer with it."""
    return Response(_plan_data(plan, keep_preview(plan)))


def _apply_preview(request: Request, group: str, token: str, undo: bool) -> Response:
    """Apply the saved preview ``token`` of ``group`` exactly as previewed."""
    require_group(group)
    here = "undo" if undo else "reset"
    saved = kept_preview(token, group)
    if saved is None:
        raise ApiError(
            404,
            "preview_not_found",
            f"There is no {here} preview {token!r} for group {group!r} (never made, or "
            f"applied already): preview the {here} again with dry_run true.",
        )
    if saved.expired:
        minutes = int(PREVIEW_LIFETIME.total_seconds() // 60)
        raise ApiError(
            400,
            "preview_expired",
            f"The {here} preview {token!r} is more than {minutes} minutes old: preview the "
            f"{here} again with dry_run true and apply the new token.",
        )
    plan = kept_plan(saved)
    if (plan.mode == "undo") != undo:
        other = "reset" if undo else "undo"
        raise ApiError(
            400,
            "wrong_preview",
            f"{token!r} is a preview of an {other}: apply it with POST to "
            f"/api/v1/groups/{group}/{other}/.",
        )
    written = operations.apply_reset_plan(request.user, plan)
    saved.delete()
    return Response(
        {
            "group": plan.group,
            "topic": plan.topic,
            "mode": plan.mode,
            "token": plan.token,
            "changed": len(written),
            "changes": [_change_data(c) for c in written[:LISTED_QUEUES]],
            "consumed_again": plan.consumed_again,
            "skipped": plan.skipped,
        }
    )


def _require_preview_token(data: dict, what: str) -> str:
    if "plan" not in data:
        raise ApiError(
            400,
            "preview_required",
            f"Preview the {what} first (dry_run true), then apply it with dry_run false "
            "and plan set to the preview's token.",
        )
    return data["plan"]


def _require_group_or_dlq(group: str) -> None:
    """A group that committed offsets, or has dead letters left from one."""
    store = get_store()
    if group not in store.groups() and not dlq_exists(store, group):
        raise GroupNotFoundError(f"there is no consumer group named {group!r}")


# -------------------------------------------------------------------------- views


def _metrics_data(metrics: GroupMetrics | None) -> dict | None:
    if metrics is None:
        return None
    fields = ("status", "sampled_ms", "lag_seconds", "consume_rate", "produce_rate")
    fields += ("drain_seconds", "expiry_risk_hours")
    return {name: getattr(metrics, name) for name in fields}


class GroupList(APIView):
    @extend_schema(
        operation_id="v1_groups_list",
        parameters=[GroupListQuery],
        responses={200: paginated(GroupSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(GroupListQuery, request.query_params)
        store = get_store()
        summaries = filter_groups(
            group_summaries(store, with_queues=False, figures=scale.SampledFigures()),
            query.get("q", "").strip(),
            query.get("topic", "").strip(),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(summaries, request, view=self)
        return paginator.get_paginated_response(
            [
                {
                    "group": row.group,
                    "lag": row.lag,
                    "topics": row.topic_names,
                    "queues_behind": row.queues_behind,
                    "members": row.members,
                    "status": row.status,
                }
                for row in group_rows(store, page)
            ]
        )


class GroupDetail(APIView):
    change_role = ADMIN

    @extend_schema(parameters=[GroupDetailQuery], responses={200: GroupDetailSerializer})
    def get(self, request: Request, group: str) -> Response:
        query = validated(GroupDetailQuery, request.query_params)
        require_group(group)
        store = get_store()
        detail = group_detail(store, group, {query.get("topic", ""): query.get("queue_page")})
        return Response(
            {
                "group": group,
                "lag": detail.lag,
                "topics": list(detail.summary.topics),
                "big_topics": [
                    {
                        "topic": big.topic,
                        "lag": big.sampled.lag if big.sampled else None,
                        "queues_behind": big.sampled.queues_behind if big.sampled else None,
                        "sampled_ms": big.sampled.sampled_ms if big.sampled else None,
                        "queues": big.page.paginator.count,
                        "queue_page": big.page.number,
                        "queue_pages": big.page.paginator.num_pages,
                    }
                    for big in detail.big_topics.values()
                ],
                "queues": [
                    {
                        "topic": r.topic,
                        "queue": r.queue,
                        "committed": r.committed,
                        "max_offset": r.max_offset,
                        "lag": r.lag,
                        "owner": r.owner,
                        "last_commit_ms": r.last_commit_ms,
                        "status": r.status,
                        "lag_seconds": r.lag_seconds,
                    }
                    for r in detail.rows
                ],
                "members": [
                    {
                        **member,
                        "queues": [{"topic": t, "queue": int(q)} for t, q in member["queues"]],
                    }
                    for member in detail.members
                ],
                "has_dlq": dlq_exists(store, group),
                "status": detail.metrics.status if detail.metrics else None,
                "metrics": _metrics_data(detail.metrics),
            }
        )

    @extend_schema(responses={204: None})
    def delete(self, request: Request, group: str) -> Response:
        operations.delete_group(request.user, group)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupReset(APIView):
    """Preview a reset of the group's offsets on one topic, or apply a saved preview."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(
        request={"application/json": RESET_BODY},
        responses={200: PREVIEW_OR_APPLIED},
    )
    def post(self, request: Request, group: str) -> Response:
        data = validated(ResetOffsets, request.data)
        if not data["dry_run"]:
            return _apply_preview(request, group, _require_preview_token(data, "reset"), False)
        require_group(group)
        store = get_store()
        topic = data["topic"]
        store.topic(topic)  # TopicNotFoundError: 404
        topics = group_summary(store, group).topics
        if topic not in topics:
            raise ApiError(
                404,
                "topic_not_consumed",
                f"Group {group!r} has no offsets on topic {topic!r}, so there is nothing to "
                f"reset there; its topics: {', '.join(topics) or 'none'}.",
            )
        mode = data["mode"]
        value: Any = data.get("value")
        if mode == "offset":
            queues = store.topic(topic).queues
            value = {int(queue): offset for queue, offset in data["offsets"].items()}
            missing = sorted(queue for queue in value if queue >= queues)
            if missing:
                raise QueueNotFoundError(
                    f"topic {topic!r} has queues 0 to {queues - 1}, not {missing[0]}"
                )
        return _save_preview(preview_reset(store, group, topic, mode, value))


class GroupUndo(APIView):
    """Preview the undo of the group's latest reset on a topic, or apply a saved preview."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(
        request={"application/json": UNDO_BODY},
        responses={200: PREVIEW_OR_APPLIED},
    )
    def post(self, request: Request, group: str) -> Response:
        data = validated(UndoReset, request.data)
        if not data["dry_run"]:
            return _apply_preview(request, group, _require_preview_token(data, "undo"), True)
        require_group(group)
        store = get_store()
        store.topic(data["topic"])  # TopicNotFoundError: 404
        try:
            plan = preview_undo(store, group, data["topic"])
        except ResetNotUndoableError as error:
            sentence = str(error)
            raise ApiError(409, "not_undoable", f"{sentence[:1].upper()}{sentence[1:]}.") from None
        except ResetError as error:
            raise ApiError(404, "nothing_to_undo", f"Nothing to undo: {error}.") from None
        return _save_preview(plan)


class GroupHistory(APIView):
    @extend_schema(
        parameters=[HistoryQuery],
        responses={200: paginated(HistoryEntrySerializer)},
    )
    def get(self, request: Request, group: str) -> Response:
        query = validated(HistoryQuery, request.query_params)
        require_group(group)
        store = get_store()
        everything = store.offset_history(group, limit=2**62)
        latest = latest_resets(everything)
        topic = query.get("topic", "")
        queue = query.get("queue")
        picked = [
            c
            for c in everything
            if (not topic or c.topic == topic) and (queue is None or c.queue == queue)
        ]
        paginator = Pagination()
        page = paginator.paginate_queryset(picked, request, view=self)
        return paginator.get_paginated_response(
            [
                {
                    **_change_data(c),
                    "label": reason_label(c.reason),
                    "undoable": latest.get(c.topic) == c.reason,
                }
                for c in page
            ]
        )


class GroupDlq(APIView):
    @extend_schema(responses={200: paginated(DeadLetterSerializer)})
    def get(self, request: Request, group: str) -> Response:
        _require_group_or_dlq(group)
        listing = DlqMessages(get_store(), dlq_topic(group))
        paginator = Pagination()
        page = paginator.paginate_queryset(listing, request, view=self)
        return paginator.get_paginated_response(
            [{**message_data(m), **dead_letter_origin(m)} for m in page]
        )


class GroupRedrive(APIView):
    """Send dead letters back to the topics they came from (each at most once)."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(
        request={"application/json": REDRIVE_BODY}, responses={200: RedriveResultSerializer}
    )
    def post(self, request: Request, group: str) -> Response:
        data = validated(Redrive, request.data)
        _require_group_or_dlq(group)
        ids = list(dict.fromkeys(data["message_ids"])) if "message_ids" in data else None
        results = operations.redrive(request.user, group, ids)
        duplicates = sum(1 for r in results if r.status == STATUS_DUPLICATE)
        return Response(
            {
                "redriven": len(results),
                "sent": len(results) - duplicates,
                "duplicates": duplicates,
                "messages": [
                    {
                        "message_id": r.message_id,
                        "topic": r.topic,
                        "queue": r.queue,
                        "queue_offset": r.queue_offset,
                        "duplicate": r.status == STATUS_DUPLICATE,
                    }
                    for r in results
                ],
            }
        )


class GroupCopy(APIView):
    """Give this group (created if need be) the committed offsets of ``source``."""

    method_roles = {"POST": OPERATOR}

    @extend_schema(request=CopyOffsets, responses={200: CopyResultSerializer})
    def post(self, request: Request, group: str) -> Response:
        data = validated(CopyOffsets, request.data)
        changes = operations.copy_group_offsets(request.user, data["source"], group)
        return Response(
            {
                "source": data["source"],
                "target": group,
                "changes": [_change_data(c) for c in changes],
            }
        )


urlpatterns = [
    path("groups/", GroupList.as_view(), name="api-groups"),
    path("groups/<name:group>/", GroupDetail.as_view(), name="api-group"),
    path("groups/<name:group>/reset/", GroupReset.as_view(), name="api-group-reset"),
    path("groups/<name:group>/undo/", GroupUndo.as_view(), name="api-group-undo"),
    path("groups/<name:group>/history/", GroupHistory.as_view(), name="api-group-history"),
    path("groups/<name:group>/dlq/", GroupDlq.as_view(), name="api-group-dlq"),
    path("groups/<name:group>/dlq/redrive/", GroupRedrive.as_view(), name="api-group-dlq-redrive"),
    path("groups/<name:group>/copy/", GroupCopy.as_view(), name="api-group-copy"),
]
