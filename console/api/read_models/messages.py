"""Messages: a stored message, where an append landed, a message's consumption by
each group, a poll of a topic's tail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.fields import (
    APPEND_STATUSES,
    BodyBytesField,
    BodyEncodingField,
    BodyField,
    StoreTimeField,
)
from console.messages.consumption import Consumption
from console.messages.records import message_record
from console.messages.tail import TailAnswer
from storeadapter import message_track
from storeadapter.engine import StoredMessage, filters
from storeadapter.message_track import Copy, GroupTrack


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


class FilterSerializer(DataclassSerializer):
    """What a filter expression's scan found, and how far it got."""

    messages = StoredMessageSerializer(many=True, help_text="The matches, by queue and offset.")
    cursor = serializers.CharField(
        allow_null=True,
        help_text="Where to go on from (pass it as cursor), null when every queue was "
        "scanned to its end.",
    )
    stopped = serializers.ChoiceField(
        choices=["end", "matches", "records", "seconds"],
        help_text="Why the scan stopped: the queues' end, max_matches found, or the budget.",
    )
    scanned = serializers.IntegerField(min_value=0, help_text="Records looked at.")
    errors = serializers.IntegerField(
        min_value=0, help_text="Records the expression could not be evaluated on (not matched)."
    )
    first_error = serializers.CharField(
        allow_null=True, help_text="The first of those evaluation errors, if any."
    )
    seconds = serializers.SerializerMethodField(help_text="How long the scan took.")

    class Meta:
        dataclass = filters.FilterResult
        ref_name = "FilterResponse"
        fields = ("messages", "cursor", "stopped", "scanned", "errors", "first_error", "seconds")

    def get_seconds(self, result: filters.FilterResult) -> float:
        return round(result.seconds, 3)


@dataclass(frozen=True)
class Committed:
    """A group's offset committed on one queue, and the one it replaced."""

    group: str
    topic: str
    queue: int
    offset: int
    previous: int | None


class CommittedSerializer(DataclassSerializer):
    """A group's offset committed on one queue."""

    previous = serializers.IntegerField(
        allow_null=True, help_text="The offset before (null: the group's first commit)."
    )

    class Meta:
        dataclass = Committed
        ref_name = "CommitResponse"
        fields = ("group", "topic", "queue", "offset", "previous")
