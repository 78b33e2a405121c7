"""The read models' serializers (console/api/read_models.py) say what the answers hold."""

from __future__ import annotations

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


def test_a_message_answers_through_its_serializer_as_its_record():
    assert StoredMessageSerializer(MESSAGE).data == message_record(MESSAGE)
