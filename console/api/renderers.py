"""The API's JSON renderer: UTF-8 as DRF writes it, and any text it cannot encode (a lone
surrogate a client sent, echoed in an error) written as a JSON escape instead of failing."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.renderers import JSONRenderer
from rest_framework.utils import encoders


class SafeJSONRenderer(JSONRenderer):
    """DRF's JSONRenderer; an answer holding a lone surrogate is written with ``\\uXXXX``
    escapes (ASCII), which every JSON reader takes, rather than raising."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict | None = None,
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return json.dumps(data, cls=encoders.JSONEncoder, ensure_ascii=True).encode("ascii")
