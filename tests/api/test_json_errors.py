"""Every API error, 500 included, in the one JSON error shape (issue 32, case 4): a JSON
field name holding a lone surrogate is a JSON 400 naming it (it was an HTML 500: the 400
echoed the name and the renderer could not encode it), and an unexpected failure is a JSON
500."""

from __future__ import annotations

import pytest

from console.api import converters  # noqa: F401  (registers <name:...> before the views load)
from console.api.views import topics
from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

LONE_SURROGATE_NAME = b'{"\\ud800": 1}'


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


@pytest.mark.parametrize(
    "client_name,url",
    [
        ("as_operator", "/api/v1/topics/orders/messages/"),
        ("as_operator", "/api/v1/topics/orders/queues/0/commit/"),
        ("as_admin", "/api/v1/topics/"),
    ],
    ids=["produce", "commit", "create-topic"],
)
def test_a_lone_surrogate_field_name_is_a_json_400(request, orders, client_name, url):
    client = request.getfixturevalue(client_name)

    response = client.post(url, LONE_SURROGATE_NAME, content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = error_of(response)
    assert error["code"] == "invalid"
    assert list(error["details"]["fields"]) == ["\ud800"]


def test_an_unexpected_failure_is_a_json_500(as_viewer, orders, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something the code did not expect")

    monkeypatch.setattr(topics.TopicList, "get", broken)
    as_viewer.raise_request_exception = False

    response = as_viewer.get("/api/v1/topics/")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    error = error_of(response)
    assert error["code"] == "server_error"
    assert "something the code did not expect" not in error["message"]
