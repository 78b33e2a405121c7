"""A JSON parser with a size limit and a clear error for any body it cannot read."""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from console.api.errors import PayloadTooLarge

#: A JSON escape of a UTF-16 surrogate: the only way a decoded body can hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate(value: Any) -> str | None:
    """The first string (name or value) in parsed JSON that is not Unicode text, if any."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
    return None


class BoundedJSONParser(JSONParser):
    """JSON bodies up to ``TIDEMARK_API_MAX_BODY_BYTES``; deep nesting and lone surrogate
    escapes are a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.TIDEMARK_API_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        try:
            if declared and int(declared) > limit:
                raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
        except ValueError:
            raise ParseError("The Content-Length header is not a number.") from None
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
        try:
            text = raw.decode(parser_context.get("encoding") or "utf-8")
            parsed = json.loads(text) if text else None
        except UnicodeDecodeError:
            raise ParseError("The body is not UTF-8 text.") from None
        except RecursionError:
            raise ParseError("The JSON is nested too deeply.") from None
        except ValueError as error:
            raise ParseError(f"The body is not valid JSON: {error}.") from None
        # A paired escape (\ud83d\ude00) decodes to one character; a lone one is no text.
        if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(parsed) is not None:
            raise ParseError(
                "The body holds a lone surrogate escape (such as \\ud800) in a name or "
                "a value: JSON text must be Unicode characters."
            )
        return parsed
