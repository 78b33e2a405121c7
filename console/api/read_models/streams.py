"""Streams: a page of a stream's events, and where appended events landed."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.fields import APPEND_STATUSES, BodyEncodingField, BodyField
from console.streams.reading import EventsAppended, StreamPage


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
