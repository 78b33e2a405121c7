"""A group's dead letters: a dead message with its copies, a purge, a redrive."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.messages import StoredMessageSerializer
from console.groups.dlq import DeadCopy, Purged
from console.operations.groups import Redriven
from storeadapter.engine import STATUS_DUPLICATE


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
