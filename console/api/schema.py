"""OpenAPI schema additions: the one error shape on every operation."""

from __future__ import annotations

from typing import Any

#: The statuses any operation may answer with an error body.
ERROR_STATUSES = {
    "400": "The request is not valid; nothing was changed.",
    "401": "No valid token or session.",
    "403": "Your role does not allow this.",
    "404": "No such topic, queue, group, message or page.",
    "405": "The method is not allowed here.",
    "409": "The change conflicts with the store's state; nothing was changed.",
    "413": "The body or a message is too large.",
    "415": "The body is not JSON.",
    "429": "Too many requests; retry later.",
}

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "additionalProperties": {}},
            },
            "required": ["code", "message", "details"],
        }
    },
    "required": ["error"],
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool):
    """drf-spectacular postprocessing hook: every operation documents the error shape for
    every error status it can answer; request bodies allow no unknown fields."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["ApiError"] = ERROR_SCHEMA
    # Request bodies are read by StrictSerializer, which refuses unknown fields.
    for name, schema in schemas.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERROR_STATUSES.items():
                responses.setdefault(status, {"description": description, "content": error})
    return result
