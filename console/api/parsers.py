"""A JSON parser with a size limit and a clear error for any body it cannot read."""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from console.api.errors import PayloadTooLarge


class BoundedJSONParser(JSONParser):
    """JSON bodies up to ``TIDEMARK_API_MAX_BODY_BYTES``; deep nesting is a 400."""

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
            return json.loads(text) if text else None
        except UnicodeDecodeError:
            raise ParseError("The body is not UTF-8 text.") from None
        except RecursionError:
            raise ParseError("The JSON is nested too deeply.") from None
        except ValueError as error:
            raise ParseError(f"The body is not valid JSON: {error}.") from None
