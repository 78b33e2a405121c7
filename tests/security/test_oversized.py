"""Bodies over the limits, huge headers and deeply nested JSON: a 4xx saying so, never a
500 or a RecursionError.

The limits are lowered to 4 KB here so the bodies stay small; the code reads the same
settings (TIDEMARK_API_MAX_BODY_BYTES, DATA_UPLOAD_MAX_MEMORY_SIZE) at its default 8 MiB.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from console.accounts.models import ApiToken

pytestmark = pytest.mark.django_db

LIMIT = 4096

#: (method, path) of API endpoints that read a JSON body.
BODY_ENDPOINTS = [
    ("post", "/api/v1/topics/"),
    ("post", "/api/v1/topics/orders/messages/"),
    ("post", "/api/v1/topics/orders/queues/0/commit/"),
    ("post", "/api/v1/groups/billing/reset/"),
    ("post", "/api/v1/alerts/rules/"),
    ("patch", "/api/v1/alerts/rules/{rule_id}/"),
]

DEEP = 100_000


@pytest.fixture
def small_limits(settings):
    settings.TIDEMARK_API_MAX_BODY_BYTES = LIMIT
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    return settings


@pytest.fixture
def api(admin) -> APIClient:
    _, key = ApiToken.issue(admin, "oversized")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"], body
    return body["error"]


def send_raw(client, method: str, path: str, body: str | bytes, **extra):
    return getattr(client, method)(path, data=body, content_type="application/json", **extra)


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_a_json_body_over_the_limit_is_413(method, path, api, world, small_limits):
    body = json.dumps({"body": "x" * (2 * LIMIT)})

    response = send_raw(api, method, path.format(**world), body)

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"


def test_a_declared_length_over_the_limit_is_413_before_reading(api, world, small_limits):
    response = send_raw(api, "post", "/api/v1/topics/", "{}", CONTENT_LENGTH=str(10 * LIMIT))

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"


def test_a_content_length_that_is_not_a_number_is_400(api, world):
    response = send_raw(api, "post", "/api/v1/topics/", "{}", CONTENT_LENGTH="lots")

    assert response.status_code == 400
    # Read as an empty body: the fields it needs are missing.
    assert error_of(response)["code"] in ("malformed_request", "invalid")


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_json_nested_100000_deep_is_400(method, path, api, world):
    response = send_raw(api, method, path.format(**world), "[" * DEEP + "]" * DEEP)

    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_request"


def test_an_unclosed_nest_100000_deep_is_400(api, world):
    response = send_raw(api, "post", "/api/v1/topics/", "[" * DEEP)

    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_request"


def test_nesting_that_parses_is_refused_by_the_fields(api, world):
    deep = json.loads("[" * 500 + "]" * 500)

    response = api.post(
        "/api/v1/topics/orders/messages/",
        {"body": "x", "properties": {"p": deep}, "key": deep},
        format="json",
    )

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"


def test_a_form_body_is_415_in_the_error_shape(api, world):
    response = api.post("/api/v1/topics/", {"name": "x", "queues": 1}, format="multipart")

    assert response.status_code == 415
    assert error_of(response)["code"] == "unsupported_media_type"


def test_a_page_form_over_the_limit_is_400(as_admin, world, small_limits):
    response = as_admin.post("/topics/", {"name": "t", "queues": 1, "pad": "x" * (2 * LIMIT)})

    assert response.status_code == 400
    assert b"too large" in response.content


def test_a_page_form_with_too_many_fields_is_400(as_admin, world, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 50
    fields = {f"f{i}": "x" for i in range(100)}

    response = as_admin.post("/topics/", {"name": "t", "queues": 1, **fields})

    assert response.status_code == 400
    assert b"too many form" in response.content


HUGE = "a" * 65_536


@pytest.mark.parametrize(
    "header",
    ["HTTP_AUTHORIZATION", "HTTP_COOKIE", "HTTP_X_CSRFTOKEN", "HTTP_USER_AGENT", "HTTP_ACCEPT"],
)
def test_a_64_kb_header_on_the_api_is_never_a_500(header, anonymous_api, world):
    value = f"Token {HUGE}" if header == "HTTP_AUTHORIZATION" else HUGE

    response = anonymous_api.get("/api/v1/topics/", **{header: value})

    assert 400 <= response.status_code < 500
    error_of(response)


@pytest.mark.parametrize("header", ["HTTP_COOKIE", "HTTP_USER_AGENT", "HTTP_REFERER"])
def test_a_64_kb_header_on_a_page_is_never_a_500(header, as_viewer, world):
    response = as_viewer.get("/topics/", **{header: HUGE})

    assert response.status_code < 500


def test_a_64_kb_host_header_is_400(client, db):
    response = client.get("/accounts/login/", HTTP_HOST=HUGE)

    assert response.status_code == 400


@pytest.fixture
def anonymous_api(db) -> APIClient:
    return APIClient()
