"""Helpers for the API tests: expected statuses per role, the one error shape."""

from __future__ import annotations

#: Which of `clients` may do a thing that needs each role: the rest get 401 or 403.
ALLOWED = {
    "viewer": ("viewer", "operator", "admin"),
    "operator": ("operator", "admin"),
    "admin": ("admin",),
}


def expected_status(client_name: str, role: str, allowed_status: int) -> int:
    """The status a client should get for an action needing `role`."""
    if client_name == "anonymous":
        return 401
    return allowed_status if client_name in ALLOWED[role] else 403


def error_of(response) -> dict:
    """The error object of an error response, checked to have the one API error shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["message"], body
    return body["error"]
