"""Serializer building blocks shared by the API's resources."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from console.api.query_string import given_more_than_once
from console.api.rules import Rule, only
from console.core.bounds import EARLIEST_DATE, LATEST_DATE, date_in_range


def _json_type_error(field: serializers.Field, value: Any) -> str | None:
    """Why a JSON value does not have the field's type (DRF itself would coerce 5 to "5",
    "5" to 5 and "yes" to True), or None."""
    if value is None:
        return None
    if isinstance(field, serializers.ChoiceField):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.CharField):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "Must be true or false."
    if isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else "Must be a whole number."
    if isinstance(field, serializers.FloatField):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "Must be a number."
    return None


#: What Python's ``str.strip`` strips (``str.isspace``), as a character class that reads
#: the same in Python and in ECMA 262 (whose ``\s`` differs).
SPACE_CLASS = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: Text without NUL characters that is not blank once stripped (what a form's required
#: text field takes).
NOT_BLANK_PATTERN = f"^[^\\x00]*[^\\x00{SPACE_CLASS}][^\\x00]*$"
#: Text that is blank once stripped.
BLANK_PATTERN = f"^[{SPACE_CLASS}]*$"


def not_blank_text(**kwargs: Any) -> serializers.RegexField:
    """Text left as sent that a console form takes for a required field: not blank once
    stripped, no NUL (the schema says it with NOT_BLANK_PATTERN)."""
    return serializers.RegexField(NOT_BLANK_PATTERN, trim_whitespace=False, **kwargs)


#: What ``decode_body`` takes as base64: the standard alphabet, padded.
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
#: The schema of a body with ``encoding`` (``body_constraints``): base64 when it says so.
ENCODED_BODY = {
    "anyOf": [
        only("encoding", "text"),
        {"properties": {"body": {"pattern": BASE64_PATTERN}}},
    ]
}


def decode_body(data: dict) -> dict:
    """``data["body"]`` as bytes, by ``data["encoding"]`` ("text": UTF-8, "base64"): what
    a serializer of a message or an event to store does in ``validate``."""
    if data["encoding"] == "base64":
        try:
            data["body"] = base64.b64decode(data["body"], validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError(
                {"body": ["The body is not valid base64 (standard alphabet, padded)."]}
            ) from None
    else:
        data["body"] = data["body"].encode("utf-8")
    return data


class StrictSerializer(serializers.Serializer):
    """A JSON body's serializer: refuses fields it does not know (instead of silently
    ignoring a typo) and values of the wrong JSON type (instead of coercing them)."""

    #: Query-string serializers set this False: every value there is a string.
    strict_types = True
    #: What to say of a field this serializer does not take, by name, when "This field is
    #: not known." would not tell the client what to do.
    unknown_messages: dict[str, str] = {}
    #: Rules across fields (console.api.rules.Rule): checked before ``validate``, and
    #: said in the schema.
    cross_field_rules: tuple[Rule, ...] = ()
    #: JSON Schema the body's schema adds (allOf) for what its fields' schemas cannot
    #: say alone, such as the one value a field may have in this shape of the body.
    body_constraints: tuple[dict, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(k) for k in set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {
                        name: [self.unknown_messages.get(name, "This field is not known.")]
                        for name in unknown
                    }
                )
            if self.strict_types:
                wrong = {
                    name: [error]
                    for name, field in self.fields.items()
                    if name in data and (error := _json_type_error(field, data[name]))
                }
                if wrong:
                    raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)

    def run_validators(self, value: Any) -> None:
        if isinstance(value, dict):
            for rule in self.cross_field_rules:
                rule.check(value)
        super().run_validators(value)


class QuerySerializer(StrictSerializer):
    """Validates ``request.query_params``; unknown parameters (but paging) are refused, and
    so is any parameter given more than once."""

    PAGING = frozenset({"page", "page_size", "format"})
    strict_types = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        data = kwargs.get("data")
        self.repeated: dict[str, str] = {}
        if data is not None and hasattr(data, "lists"):
            self.repeated = given_more_than_once(data)
            kwargs["data"] = {k: v[-1] for k, v in data.lists() if k not in self.PAGING}
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if self.repeated:
            raise serializers.ValidationError(
                {name: [sentence] for name, sentence in self.repeated.items()}
            )
        return super().to_internal_value(data)


def validated(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict:
    """``serializer_class(data=data).validated_data``, raising a 400 when not valid."""
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def refusals(*answers: tuple[int, str]) -> dict[int, OpenApiResponse]:
    """``extend_schema(responses=...)`` entries for the errors an operation can give beyond
    those its shape implies (console.api.schema): ``refusals((409, "The topic exists."))``."""
    return {status: OpenApiResponse(ErrorSerializer, description=text) for status, text in answers}


def jsonl_export_schema(
    query: type[serializers.Serializer], what: str, *answers: tuple[int, str]
) -> Callable:
    """The ``extend_schema`` of a JSON Lines export: ``query``'s parameters, a 200 of one
    JSON object per line per ``what`` whose last line says how far the export got, and
    the ``answers`` refused as ``refusals`` takes them."""
    return extend_schema(
        parameters=[query],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description=f"One JSON object per line, per {what}; the last line says "
                "how far the export got and how to continue it.",
            ),
            **refusals(*answers),
        },
    )


class TopicNameField(serializers.CharField):
    """A topic or group name as the engine accepts (checked again by the engine)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 127)
        super().__init__(**kwargs)


#: The years of console.core.bounds (1970 to 9998) as a pattern.
BOUNDED_YEAR = r"(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9])"


@extend_schema_field(
    {
        "type": "string",
        "format": "date",
        "pattern": rf"^{BOUNDED_YEAR}-",
        "description": f"A date from {EARLIEST_DATE:%Y-%m-%d} to {LATEST_DATE:%Y-%m-%d}.",
    }
)
class BoundedDateField(serializers.DateField):
    """A date between console.core.bounds' bounds (the schema says them)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("validators", [date_in_range])
        super().__init__(**kwargs)
