"""The schema says what the API does (issue 32, case 7): the 409 a GET of stream events
gives on a topic that is not a stream topic, the message-id pattern, the time bounds, and
the page bounds of every list."""

from __future__ import annotations

import pytest

from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

STREAM_EVENTS = "/api/v1/streams/{topic}/{stream_id}/events/"


@pytest.fixture
def schema(as_viewer) -> dict:
    return as_viewer.get("/api/schema/?format=json").json()


def parameter(operation: dict, name: str) -> dict:
    return next(p for p in operation["parameters"] if p["name"] == name)


def test_get_stream_events_documents_the_409_it_gives(as_viewer, store, schema):
    store.create_topic("orders", queues=1)

    response = as_viewer.get("/api/v1/streams/orders/s-1/events/")

    assert response.status_code == 409
    assert error_of(response)["code"] == "wrong_topic_kind"
    assert "409" in schema["paths"][STREAM_EVENTS]["get"]["responses"]


def test_a_message_id_has_its_pattern(schema):
    operation = schema["paths"]["/api/v1/messages/{message_id}/"]["get"]

    assert parameter(operation, "message_id")["schema"]["pattern"] == "^[0-9A-Fa-f]{24}$"


def test_times_say_their_bounds(schema):
    operation = schema["paths"]["/api/v1/messages/"]["get"]

    description = parameter(operation, "since")["description"]
    assert "1970-01-01T00:00:00Z" in description and "9999-12-31" in description


@pytest.mark.parametrize("path", ["/api/v1/topics/", "/api/v1/messages/"])
def test_page_and_page_size_have_their_bounds(schema, path):
    operation = schema["paths"][path]["get"]

    assert parameter(operation, "page")["schema"]["minimum"] == 1
    size = parameter(operation, "page_size")
    assert size["schema"]["minimum"] == 1
    assert "more than 500 is 500" in size["description"]
