"""Fields the read models' serializers share: numbers as the read model holds them,
a body's bytes as JSON, store times as ISO 8601, what an append answers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.messages.bodies import store_time
from console.messages.records import BODY_ENCODINGS, json_body
from storeadapter.engine import STATUS_DUPLICATE, STATUS_FLUSH_TIMEOUT, STATUS_OK


class NumberField(serializers.FloatField):
    """A number answered as the read model holds it (72 stays 72: JSON has one number)."""

    def to_representation(self, value: float) -> float:
        return value


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
