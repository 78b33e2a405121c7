"""OpenAPI schema additions: the one error shape, and the errors each operation can give.

Which statuses an operation lists follows from what it takes (console.api.errors maps
every refusal to one): any operation 401 (no credentials), 403 (role), 429 (rate); one
taking a body or parameters 400 (a path's name the engine refuses, too); one taking a
body 413 and 415; one with a path parameter or a page 404; one reading the store 503 (failed or
closed). What an operation can meet beyond these (a 409 conflict, a 404 for a name in its
body, 507 for a full disk, 502 for a mail server) its view declares with
``extend_schema(responses=refusals(...))`` (console.api.serializers).
"""

from __future__ import annotations

from typing import Any

#: What each error status means, for the operations that list it.
ERROR_STATUSES = {
    "400": "The request is not valid; nothing was changed.",
    "401": "No valid token or session.",
    "403": "Your role does not allow this.",
    "404": "No such topic, queue, group, message or page.",
    "413": "The body or a message is too large.",
    "415": "The body is not JSON.",
    "429": "Too many requests; retry later.",
    "503": "The store failed or is closed; nothing was changed.",
}
#: Paths whose operations read or change the store (503 when it failed or is closed).
STORE_PATHS = (
    "/api/v1/topics/",
    "/api/v1/messages/",
    "/api/v1/groups/",
    "/api/v1/storage/",
    "/api/v1/streams/",
)

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
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            add_paging_parameters(operation)
            responses = operation.setdefault("responses", {})
            for status in error_statuses(path, operation):
                description = ERROR_STATUSES[status]
                responses.setdefault(status, {"description": description, "content": error})
    return result


#: The query parameters of every paged list (console.api.pagination.Pagination's rule).
PAGING_PARAMETERS = (
    {
        "in": "query",
        "name": "page",
        "schema": {"type": "integer", "minimum": 1},
        "description": "A page number, from 1 (a page past the last is a 404).",
    },
    {
        "in": "query",
        "name": "page_size",
        "schema": {"type": "integer", "minimum": 1},
        "description": "Items per page, from 1 (default 50; more than 500 is 500).",
    },
)


def add_paging_parameters(operation: dict[str, Any]) -> None:
    """A paged list (its 200 is a Paginated...List) documents page and page_size."""
    answer = operation.get("responses", {}).get("200", {})
    ref = answer.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
    if not ref.rsplit("/", 1)[-1].startswith("Paginated"):
        return
    parameters = operation.setdefault("parameters", [])
    named = {p.get("name") for p in parameters if p.get("in") == "query"}
    parameters.extend(dict(p) for p in PAGING_PARAMETERS if p["name"] not in named)


def error_statuses(path: str, operation: dict[str, Any]) -> list[str]:
    """The error statuses an operation gives by what it takes (the module's rules)."""
    statuses = ["401", "403", "429"]
    takes_body = "requestBody" in operation
    parameters = operation.get("parameters", [])
    if takes_body or parameters:
        statuses.append("400")
    if takes_body:
        statuses += ["413", "415"]
    if any(p.get("in") == "path" for p in parameters) or any(
        p.get("in") == "query" and p.get("name") == "page" for p in parameters
    ):
        statuses.append("404")  # no such object, or a page past the last
    if path.startswith(STORE_PATHS):
        statuses.append("503")
    return sorted(statuses)
