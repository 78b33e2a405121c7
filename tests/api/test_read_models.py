"""The read models' serializers (the console/api/read_models package) say what the answers hold."""

from __future__ import annotations

from rest_framework import serializers

from console.api.read_models import StoredMessageSerializer
from console.messages.records import message_record
from storeadapter.engine import StoredMessage

MESSAGE = StoredMessage(
    "0" * 24, "orders", 1, 5, 100, 1_700_000_000_000, 1_700_000_000_001, None, ["k1"], {}, b"\xff"
)


def test_a_message_s_record_has_the_schema_s_fields_in_their_order():
    """The record is built directly (the export writes 100,000 of them), not by the
    serializer's fields: it must still be what the schema says."""
    assert list(message_record(MESSAGE)) == list(StoredMessageSerializer().fields)


def test_a_message_s_record_is_what_the_serializer_s_fields_make_of_it():
    by_fields = serializers.Serializer.to_representation(StoredMessageSerializer(), MESSAGE)

    assert by_fields == message_record(MESSAGE)
    assert StoredMessageSerializer(MESSAGE).data == message_record(MESSAGE)
