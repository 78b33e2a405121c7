"""The read models' serializers: the API answers with them and the CLI's ``--json`` prints
them, so each shape is written once, by the dataclass the console already reads.

A ``DataclassSerializer`` (djangorestframework-dataclasses) takes its fields and their
types from the dataclass; what the type cannot say (a choice, a help text, a field the
answer leaves out, an API name that differs from the attribute's) is said here, and
drf-spectacular reads all of it into the schema. ``ref_name`` keeps the schema's
component names. This module has no views or URLs, so the CLI imports it without the
API's routes.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.groups.detail import GroupRow, LagRow
from console.groups.dlq import DeadCopy, Purged
from console.groups.resets import KeptPlanView, MovedQueue, ResetDetail, ResetEntry
from console.messages.bodies import store_time
from console.messages.consumption import Consumption
from console.messages.records import BODY_ENCODINGS, json_body, message_record
from console.messages.tail import TailAnswer
from console.monitoring.metrics import GROUP_STATUSES, QUEUE_STATUSES, GroupMetrics
from console.operations.groups import Redriven, ResetApplied
from console.storage.report import StorageReport
from console.streams.reading import EventsAppended, StreamPage
from storeadapter import message_track
from storeadapter.disk_use import DiskUse
from storeadapter.engine import STATUS_DUPLICATE, STATUS_FLUSH_TIMEOUT, STATUS_OK, StoredMessage
from storeadapter.message_track import Copy, GroupTrack
from storeadapter.offset_reset import PlanView, QueueReset
from storeadapter.reset_modes import MODE_NAMES, UNDO
from storeadapter.summaries import GroupQueueLag, SegmentRow

# ------------------------------------------------------------------------ groups


class GroupSerializer(DataclassSerializer):
    """A consumer group as the list shows it."""

    topics = serializers.ListField(child=serializers.CharField(), source="topic_names")
    status = serializers.ChoiceField(
        choices=list(GROUP_STATUSES),
        allow_null=True,
        help_text="Burrow-style status from the latest metrics sample; null before one.",
    )

    class Meta:
        dataclass = GroupRow
        ref_name = "Group"
        fields = ("group", "lag", "topics", "queues_behind", "members", "status")
        extra_kwargs = {
            "lag": {"help_text": "Messages behind, over all its queues."},
            "queues_behind": {"help_text": "Queues with a lag above 0."},
            "members": {"help_text": "Live members (heartbeat within 10 s)."},
        }


class QueueLagSerializer(DataclassSerializer):
    """A queue's lag as the store has it (``GroupQueueLag``): the rows of the CLI's
    ``tidemark lag --json``, whose fields are ``GroupQueue``'s first ones."""

    class Meta:
        dataclass = GroupQueueLag
        ref_name = "QueueLag"
        fields = ("topic", "queue", "committed", "max_offset", "lag", "lost")


class GroupQueueSerializer(DataclassSerializer):
    """One queue of the group: its lag, owner and last commit."""

    status = serializers.ChoiceField(
        choices=list(QUEUE_STATUSES), allow_null=True, help_text="From the latest sample."
    )

    class Meta:
        dataclass = LagRow
        ref_name = "GroupQueue"
        fields = ("topic", "queue", "committed", "max_offset", "lag", "owner")
        fields += ("last_commit_ms", "status", "lag_seconds", "lost")
        extra_kwargs = {
            "committed": {"help_text": "None: never committed."},
            "owner": {"help_text": "The live member holding it."},
            "lag_seconds": {"help_text": "From the latest sample.", "required": True},
            "lost": {
                "help_text": "Of its lag, the messages retention deleted before the group "
                "consumed them.",
                "required": True,
            },
        }


class GroupMetricsSerializer(DataclassSerializer):
    """The group's latest metrics sample."""

    status = serializers.ChoiceField(choices=list(GROUP_STATUSES))

    class Meta:
        dataclass = GroupMetrics
        ref_name = "GroupMetrics"
        fields = ("status", "sampled_ms", "lag_seconds", "consume_rate", "produce_rate")
        fields += ("drain_seconds", "expiry_risk_hours", "lost", "drain_state")
        extra_kwargs = {
            "consume_rate": {"help_text": "Messages per second."},
            "produce_rate": {"help_text": "Messages per second."},
            "drain_seconds": {"help_text": "null: never (not draining)."},
            "expiry_risk_hours": {
                "help_text": "Hours until retention deletes unconsumed messages; null: none."
            },
            "lost": {
                "help_text": "Of its lag, the messages retention deleted unconsumed (sampled).",
                "required": True,
            },
            "drain_state": {
                "help_text": "caught up, draining, not draining or not measured yet.",
                "required": True,
            },
        }


# The engine's ``OffsetChange`` is a named tuple, not a dataclass: its fields are listed.
class OffsetChangeSerializer(serializers.Serializer):
    """One change of a committed offset: ``old`` is null for a group's first commit."""

    topic = serializers.CharField()
    queue = serializers.IntegerField()
    old = serializers.IntegerField(allow_null=True)
    new = serializers.IntegerField()
    time_ms = serializers.IntegerField()
    who = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)


# ------------------------------------------------------------------------ resets


class QueueResetSerializer(DataclassSerializer):
    """One queue of a reset's preview: where the group is on it and where it would go."""

    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()

    class Meta:
        dataclass = QueueReset
        ref_name = "QueueReset"
        fields = ("queue", "committed", "current", "target", "min_offset", "max_offset")
        fields += ("clamped", "span_from_ms", "span_to_ms", "planned", "consumed_again")
        fields += ("skipped",)
        extra_kwargs = {
            "committed": {"help_text": "None: never committed."},
            "current": {"help_text": "Where the group consumes from now."},
            "clamped": {
                "help_text": "Why the target was moved into the queue's range.",
                "required": True,
            },
            "span_from_ms": {"required": True},
            "span_to_ms": {"required": True},
            "planned": {
                "help_text": "False: the reset leaves this queue alone.",
                "required": True,
            },
        }


class PlanViewSerializer(DataclassSerializer):
    """A reset's plan: every queue's current offset and target, and the counts over every
    queue (the rows of ``tidemark reset-offsets --json``; the API's preview adds how to
    apply it)."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    value = serializers.JSONField(
        allow_null=True,
        help_text="time: ms; shift: N; offset: the offsets asked for; group: the source "
        "group; undo: the id of the reset undone.",
    )
    queues = QueueResetSerializer(
        many=True,
        help_text="Every queue of the topic; of a topic with more than 1,000 queues, the "
        "first 1,000 that move (listed_all false; the counts cover every queue).",
    )

    class Meta:
        dataclass = PlanView
        ref_name = "ResetPlanView"
        fields = ("group", "topic", "mode", "value", "queues", "past_newest", "span_from_ms")
        fields += ("span_to_ms", "queue_count", "listed_all", "changes", "consumed_again")
        fields += ("skipped", "clamped", "relative")
        extra_kwargs = {
            "past_newest": {
                "help_text": "time: queues the time is after the newest message of (there the "
                "same as latest)."
            },
            "span_from_ms": {"help_text": "Over the listed queues."},
            "span_to_ms": {"help_text": "Over the listed queues."},
            "queue_count": {"help_text": "Queues of the topic."},
            "listed_all": {"help_text": "Whether queues lists every queue."},
            "changes": {"help_text": "Queues whose offset would move now."},
            "clamped": {
                "help_text": "Queues whose target was moved into their range (of a big topic: "
                "of those that move)."
            },
            "relative": {
                "help_text": "True for a shift: applied from the offsets at the moment of applying."
            },
        }


class ResetPlanSerializer(PlanViewSerializer):
    """A reset's preview, kept under its token until it expires."""

    class Meta(PlanViewSerializer.Meta):
        dataclass = KeptPlanView
        ref_name = "ResetPlan"
        fields = PlanViewSerializer.Meta.fields[:10] + ("token",)
        fields += PlanViewSerializer.Meta.fields[10:] + ("live_members", "expires_ms")
        extra_kwargs = {
            **PlanViewSerializer.Meta.extra_kwargs,
            "token": {"help_text": "Apply with dry_run false and this as plan."},
            "live_members": {
                "help_text": "The group's live members: they continue from the new offsets."
            },
            "expires_ms": {"help_text": "Until when the preview can be applied."},
        }


class ResetAppliedSerializer(DataclassSerializer):
    """What applying a preview did: the queues moved, each with its real offset before."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    changes = OffsetChangeSerializer(
        many=True, help_text="The first 1,000 of them: old is each queue's real offset before."
    )

    class Meta:
        dataclass = ResetApplied
        ref_name = "ResetApplied"
        fields = ("reset_id", "group", "topic", "mode", "changed", "changes", "consumed_again")
        fields += ("skipped",)
        extra_kwargs = {
            "reset_id": {
                "help_text": "Its id in resets/ (undo: resets/<id>/undo/); null: no queue moved."
            },
            "changed": {"help_text": "Queues whose offset moved."},
        }


class AppliedResetSerializer(DataclassSerializer):
    """An applied reset or undo of the group."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    value = serializers.JSONField(allow_null=True, help_text="As in the preview.")

    class Meta:
        dataclass = ResetEntry
        ref_name = "AppliedReset"
        fields = ("id", "group", "topic", "mode", "value", "undoes", "undone_by", "who")
        fields += ("applied_ms", "moved", "consumed_again", "skipped")
        extra_kwargs = {
            "undoes": {"help_text": "An undo: the reset undone."},
            "undone_by": {"help_text": "The undos applied of this reset."},
            "who": {"allow_blank": True},
            "moved": {"help_text": "Queues whose offset moved."},
        }


class MovedQueueSerializer(DataclassSerializer):
    """A queue the reset moved."""

    class Meta:
        dataclass = MovedQueue
        ref_name = "MovedQueue"
        fields = ("queue", "before", "after")
        extra_kwargs = {"before": {"help_text": "None: never committed."}}


class AppliedResetDetailSerializer(AppliedResetSerializer):
    """An applied reset with each queue's offset before and after."""

    queues = MovedQueueSerializer(many=True, help_text="The first 1,000 queues moved.")

    class Meta(AppliedResetSerializer.Meta):
        dataclass = ResetDetail
        ref_name = "AppliedResetDetail"
        fields = AppliedResetSerializer.Meta.fields + ("queues", "listed_all")
        extra_kwargs = {
            **AppliedResetSerializer.Meta.extra_kwargs,
            "listed_all": {"help_text": "Whether queues lists every queue moved."},
        }


# ----------------------------------------------------------------------- storage


class NumberField(serializers.FloatField):
    """A number answered as the read model holds it (72 stays 72: JSON has one number)."""

    def to_representation(self, value: float) -> float:
        return value


class SegmentSerializer(DataclassSerializer):
    class Meta:
        dataclass = SegmentRow
        ref_name = "Segment"
        fields = ("name", "base", "size", "disk_bytes", "used_bytes", "first_store_ms")
        fields += ("last_store_ms", "expires_at_ms")


class ThresholdsSerializer(DataclassSerializer):
    warn_ratio = NumberField()
    force_ratio = NumberField()
    reject_ratio = NumberField()

    class Meta:
        dataclass = DiskUse
        ref_name = "Thresholds"
        fields = ("warn_ratio", "force_ratio", "reject_ratio")


class StorageSerializer(DataclassSerializer):
    retention_hours = NumberField()
    commit_log = serializers.DictField(child=serializers.IntegerField())
    last_recovery = serializers.DictField(allow_null=True)
    last_retention = serializers.DictField(allow_null=True)
    corruptions = serializers.ListField(child=serializers.DictField())
    disk_thresholds = ThresholdsSerializer()
    segments = SegmentSerializer(many=True)

    class Meta:
        dataclass = StorageReport
        ref_name = "Storage"
        fields = ("path", "store_id", "flush_mode", "segment_bytes", "segment_count")
        fields += ("disk_bytes", "retention_hours", "last_flush_ms", "commit_log")
        fields += ("last_recovery", "last_retention", "corruptions", "failed", "disk_ratio")
        fields += ("disk_thresholds", "segments")


# ---------------------------------------------------------- messages and events

#: What an append answers per message (the schema's AppendStatusEnum).
APPEND_STATUSES = [STATUS_OK, STATUS_DUPLICATE, STATUS_FLUSH_TIMEOUT]


class BodyField(serializers.CharField):
    """A body's bytes as JSON: UTF-8 text when it decodes, else base64 (its
    ``body_encoding`` says which)."""

    def to_representation(self, value: bytes) -> str:
        return json_body(value)[0]


class BodyEncodingField(serializers.ChoiceField):
    """How ``body`` holds the bytes: "text" (UTF-8) or "base64"."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("source", "body")
        super().__init__(choices=list(BODY_ENCODINGS), **kwargs)

    def to_representation(self, value: bytes) -> str:
        return json_body(value)[1]


class BodyBytesField(serializers.IntegerField):
    """How many bytes a body holds."""

    def to_representation(self, value: bytes) -> int:
        return len(value)


class StoreTimeField(serializers.CharField):
    """A store time in milliseconds as ISO 8601 in UTC, to the millisecond."""

    def to_representation(self, value: int) -> str:
        return store_time(value).isoformat(timespec="milliseconds")


# The engine's StoredEvent and EventAppendResult are named tuples: their fields are listed.
class StoredEventSerializer(serializers.Serializer):
    """An event of the stream."""

    version = serializers.IntegerField()
    event_type = serializers.CharField(allow_null=True)
    command_id = serializers.CharField(allow_null=True)
    store_time_ms = serializers.IntegerField()
    message_id = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    body = BodyField()
    body_encoding = BodyEncodingField()


class StreamEventsSerializer(DataclassSerializer):
    """A page of a stream's events, in version order."""

    events = StoredEventSerializer(many=True)

    class Meta:
        dataclass = StreamPage
        ref_name = "StreamEvents"
        fields = ("topic", "stream_id", "stream_version", "first_kept_version")
        fields += ("deleted_by_retention", "events", "next_from_version")
        extra_kwargs = {
            "stream_version": {"help_text": "The stream's newest version."},
            "first_kept_version": {"help_text": "The oldest version retention has not deleted."},
            "deleted_by_retention": {
                "help_text": "True when the read started at first_kept_version, later than asked."
            },
            "next_from_version": {
                "help_text": "from_version of the next page; null at the newest."
            },
        }


class AppendedEventSerializer(serializers.Serializer):
    """Where an event landed."""

    version = serializers.IntegerField()
    message_id = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    store_time_ms = serializers.IntegerField()
    status = serializers.ChoiceField(choices=APPEND_STATUSES)


class AppendedSerializer(DataclassSerializer):
    """The events appended, all or none."""

    results = AppendedEventSerializer(many=True)

    class Meta:
        dataclass = EventsAppended
        ref_name = "Appended"
        fields = ("stream_version", "results")


# The engine's StoredMessage and AppendResult are named tuples: their fields are listed.
class StoredMessageSerializer(serializers.Serializer):
    """A stored message; ``body`` is UTF-8 text when it decodes, else base64."""

    message_id = serializers.CharField()
    topic = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    commit_offset = serializers.IntegerField()
    born_time_ms = serializers.IntegerField()
    store_time_ms = serializers.IntegerField()
    store_time = StoreTimeField(
        source="store_time_ms", help_text="The store time as ISO 8601, in UTC."
    )
    tag = serializers.CharField(allow_null=True)
    keys = serializers.ListField(child=serializers.CharField())
    properties = serializers.DictField(child=serializers.CharField())
    body_encoding = BodyEncodingField()
    body = BodyField()
    body_bytes = BodyBytesField(source="body")

    def to_representation(self, instance: StoredMessage) -> dict[str, Any]:
        # The record the JSON Lines export writes too (console.messages.records), built
        # directly: a quarter of these fields' cost per message (6.6 against 29 us), which
        # an export of 100,000 messages pays. A test holds it to what the fields give.
        return message_record(instance)


class AppendResultSerializer(serializers.Serializer):
    """Where an appended message landed."""

    message_id = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    commit_offset = serializers.IntegerField()
    store_time_ms = serializers.IntegerField()
    status = serializers.ChoiceField(choices=APPEND_STATUSES)


class MessageCopySerializer(DataclassSerializer):
    """A retry or dead-letter copy of the message."""

    state = serializers.ChoiceField(
        choices=list(message_track.STATES),
        help_text="A retry copy: CONSUMED or NOT_YET by the group; a dead letter: DEAD_LETTERED.",
    )

    class Meta:
        dataclass = Copy
        ref_name = "MessageCopy"
        fields = ("message_id", "topic", "queue", "queue_offset", "state", "retries")
        extra_kwargs = {
            "topic": {"help_text": "The group's retry or dead-letter topic."},
            "retries": {"help_text": "Tries that had failed when the copy was made."},
        }


class GroupConsumptionSerializer(DataclassSerializer):
    """Whether one group consumed the message."""

    state = serializers.ChoiceField(
        choices=list(message_track.STATES),
        help_text="CONSUMED, NOT_YET or LOST_TO_RETENTION (deleted before the group got to it).",
    )
    committed_offset = serializers.IntegerField(
        source="committed",
        allow_null=True,
        help_text="The group's in the message's queue; null: never committed.",
    )
    copies = MessageCopySerializer(many=True)

    class Meta:
        dataclass = GroupTrack
        ref_name = "GroupConsumption"
        fields = ("group", "state", "committed_offset", "before", "copies")
        extra_kwargs = {
            "before": {
                "help_text": "NOT_YET: the queue's messages before this one the group has "
                "still to consume."
            }
        }


class MessageConsumptionSerializer(DataclassSerializer):
    """The message's place and whether each group consumed it."""

    groups = GroupConsumptionSerializer(many=True)

    class Meta:
        dataclass = Consumption
        ref_name = "MessageConsumption"
        fields = ("message_id", "topic", "queue", "queue_offset", "groups")


# --------------------------------------------------------------------------- DLQ


class PurgedSerializer(DataclassSerializer):
    """What a purge of the group's dead letters deleted."""

    class Meta:
        dataclass = Purged
        ref_name = "Purged"
        fields = ("messages", "copies")
        extra_kwargs = {
            "messages": {"help_text": "Dead messages deleted."},
            "copies": {"help_text": "Copies deleted from the DLQ topic."},
        }


class DuplicateField(serializers.BooleanField):
    """Whether an append's status says it was stored before (so not stored again)."""

    def to_representation(self, value: str) -> bool:
        return value == STATUS_DUPLICATE


class RedrivenSerializer(serializers.Serializer):
    """Where a dead letter was sent (an ``AppendResult``, a named tuple)."""

    message_id = serializers.CharField()
    topic = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()
    duplicate = DuplicateField(source="status", help_text="Redriven before, so not sent again.")


class RedriveResultSerializer(DataclassSerializer):
    """What a redrive did."""

    redriven = serializers.IntegerField(
        source="handled", help_text="Dead letters handled: sent + duplicates."
    )
    sent = serializers.IntegerField(help_text="Appended to their topics now.")
    duplicates = serializers.IntegerField(help_text="Redriven before, not sent again.")
    messages = RedrivenSerializer(many=True, source="results")

    class Meta:
        dataclass = Redriven
        ref_name = "RedriveResult"
        fields = ("redriven", "sent", "duplicates", "messages")


class PlaceSerializer(serializers.Serializer):
    """Where a message sits."""

    topic = serializers.CharField()
    queue = serializers.IntegerField()
    queue_offset = serializers.IntegerField()


class RedriveMarkSerializer(serializers.Serializer):
    """A redrive of a dead letter (a ``RedrivenLetter``): when, by whom, where it went."""

    at = serializers.DateTimeField(source="redriven_at")
    by = serializers.CharField(source="who", allow_blank=True, help_text="The user who redrove it.")
    message_id = serializers.CharField(
        source="sent_message_id", help_text="The message the redrive appended."
    )
    topic = serializers.CharField(source="sent_topic")
    queue = serializers.IntegerField(source="sent_queue")
    queue_offset = serializers.IntegerField(source="sent_offset")


class CopySerializer(DataclassSerializer):
    """A copy of the dead message in the DLQ."""

    redriven = RedriveMarkSerializer(allow_null=True, help_text="null: not redriven.")

    class Meta:
        dataclass = DeadCopy
        ref_name = "Copy"
        fields = ("message_id", "store_time_ms", "redriven")
        extra_kwargs = {"message_id": {"help_text": "The copy's id in the DLQ."}}


class DeadMessageSerializer(StoredMessageSerializer):
    """A dead message: its latest copy in the DLQ, the original, and every copy."""

    origin_topic = serializers.CharField(allow_null=True, source="origin.origin_topic")
    origin_queue = serializers.IntegerField(allow_null=True, source="origin.origin_queue")
    origin_offset = serializers.IntegerField(allow_null=True, source="origin.origin_offset")
    origin_message_id = serializers.CharField(allow_null=True, source="origin.origin_message_id")
    retry_count = serializers.IntegerField(allow_null=True, source="origin.retry_count")
    last_error = serializers.CharField(allow_blank=True, source="origin.last_error")
    original = PlaceSerializer(
        allow_null=True, help_text="The original message's place (null: unknown origin)."
    )
    copies = CopySerializer(
        many=True, source="marked_copies", help_text="Oldest first; the last is this one."
    )
    waiting = serializers.BooleanField(
        help_text="Its latest copy was not redriven yet: a redrive of all sends it."
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        """The message's fields read from the latest copy."""
        fields = super().get_fields()
        for name in StoredMessageSerializer._declared_fields:
            fields[name].source = f"latest.{fields[name].source or name}"
        return fields

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return serializers.Serializer.to_representation(self, instance)


class TailSerializer(DataclassSerializer):
    """A poll of a topic's tail."""

    messages = StoredMessageSerializer(
        many=True, help_text="The messages, in the order they were appended."
    )
    cursor = serializers.CharField(help_text="The cursor to poll with next.")
    dropped = serializers.IntegerField(
        min_value=0,
        help_text="Messages appended past the cursor that the rate cap left out of this "
        "answer (the cursor is past them).",
    )
    queues = serializers.ListField(
        child=serializers.IntegerField(min_value=0), help_text="The queue ids followed."
    )

    class Meta:
        dataclass = TailAnswer
        ref_name = "TailResponse"
        fields = ("messages", "cursor", "dropped", "queues")
