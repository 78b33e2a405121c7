"""/api/v1/streams/<topic>/<stream_id>/events: read a stream, append to it."""

from __future__ import annotations

import base64

import pytest

from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/streams/accounts/a-1/events"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def store_options() -> dict:
    return {"stream_index_slots": 64}


@pytest.fixture
def accounts(store):
    store.create_stream_topic("accounts", queues=2)
    return store


def post_json(client, url: str, data) -> object:
    return client.post(url, data, format="json")


@pytest.mark.parametrize("client_name", CLIENTS)
def test_appending_events_needs_the_operator_role(clients, accounts, client_name):
    response = post_json(clients[client_name], EVENTS, {"events": [{"body": "opened"}]})

    assert response.status_code == expected_status(client_name, "operator", 201)
    assert accounts.stream_version("accounts", "a-1") == (1 if response.status_code == 201 else 0)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_reading_a_stream_needs_the_viewer_role(clients, accounts, client_name):
    accounts.append_event("accounts", "a-1", b"opened")

    response = clients[client_name].get(EVENTS)

    assert response.status_code == expected_status(client_name, "viewer", 200)


def test_events_are_appended_at_the_expected_version(as_operator, accounts):
    response = post_json(
        as_operator,
        EVENTS,
        {
            "events": [
                {"body": "opened", "event_type": "Opened"},
                {"body": "AAE=", "encoding": "base64"},
            ],
            "expected_version": 0,
            "command_id": "cmd-1",
        },
    )

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["stream_version"] == 2
    assert [r["version"] for r in data["results"]] == [1, 2]
    events = accounts.read_stream("accounts", "a-1")
    assert [(e.event_type, e.body, e.command_id) for e in events] == [
        ("Opened", b"opened", "cmd-1"),
        (None, b"\x00\x01", "cmd-1"),
    ]


def test_a_version_conflict_is_409_with_the_current_version(as_operator, accounts):
    accounts.append_events("accounts", "a-1", [b"x", b"y"])

    response = post_json(as_operator, EVENTS, {"events": [{"body": "z"}], "expected_version": 1})

    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "wrong_expected_version"
    assert error["details"]["current_version"] == 2
    assert accounts.stream_version("accounts", "a-1") == 2


def test_a_duplicate_command_is_409_with_the_version_it_produced(as_operator, accounts):
    accounts.append_event("accounts", "a-1", b"x", command_id="cmd-81")
    accounts.append_event("accounts", "a-1", b"y")

    for _ in range(2):
        response = post_json(
            as_operator, EVENTS, {"events": [{"body": "x"}], "command_id": "cmd-81"}
        )
        assert response.status_code == 409
        error = error_of(response)
        assert error["code"] == "duplicate_command"
        assert error["details"]["version"] == 1


def test_a_stream_is_read_a_page_at_a_time(as_viewer, accounts):
    for i in range(1, 8):
        accounts.append_event("accounts", "a-1", f"e{i}".encode(), command_id=f"c{i}")

    first = as_viewer.get(EVENTS + "?limit=3").json()
    second = as_viewer.get(f"{EVENTS}/?from_version={first['next_from_version']}&limit=3").json()

    assert [e["version"] for e in first["events"]] == [1, 2, 3]
    assert first["stream_version"] == 7
    assert first["events"][0] == {
        **first["events"][0],
        "body": "e1",
        "body_encoding": "text",
        "command_id": "c1",
        "event_type": None,
    }
    assert [e["version"] for e in second["events"]] == [4, 5, 6]
    last = as_viewer.get(f"{EVENTS}?from_version=7").json()
    assert last["next_from_version"] is None
    assert last["deleted_by_retention"] is False


def test_a_binary_body_comes_back_as_base64(as_viewer, accounts):
    accounts.append_event("accounts", "a-1", b"\xff\x00")

    event = as_viewer.get(EVENTS).json()["events"][0]

    assert (event["body_encoding"], base64.b64decode(event["body"])) == ("base64", b"\xff\x00")


def test_a_stream_id_may_hold_a_slash(as_operator, accounts):
    response = post_json(
        as_operator, "/api/v1/streams/accounts/orders/7/events/", {"events": [{"body": "x"}]}
    )

    assert response.status_code == 201
    assert accounts.stream_version("accounts", "orders/7") == 1


@pytest.mark.parametrize(
    ("url", "body", "code"),
    [
        (EVENTS, {"events": []}, "invalid"),
        (EVENTS, {"events": [{"body": "x"}], "expected_version": -1}, "invalid"),
        (EVENTS, {"events": [{"body": "x"}], "expected_version": "1"}, "invalid"),
        (EVENTS, {"events": [{"body": "x", "colour": "red"}]}, "invalid"),
        (EVENTS, {"events": [{"body": "%%", "encoding": "base64"}]}, "invalid"),
        (EVENTS, {"events": [{"body": "x"}], "command_id": "a\u0002b"}, "invalid_message"),
        (EVENTS, {"events": [{"body": "x", "event_type": ""}]}, "invalid"),
        (EVENTS, [1, 2], "invalid"),
        ("/api/v1/streams/nope/a-1/events", {"events": [{"body": "x"}]}, "topic_not_found"),
    ],
)
def test_bad_appends_are_refused_with_a_4xx(as_operator, accounts, url, body, code):
    response = post_json(as_operator, url, body)

    assert 400 <= response.status_code < 500
    assert error_of(response)["code"] == code


def test_events_to_an_ordinary_topic_are_refused(as_operator, accounts):
    accounts.create_topic("orders")

    response = post_json(
        as_operator, "/api/v1/streams/orders/a/events", {"events": [{"body": "x"}]}
    )
    produce = post_json(as_operator, "/api/v1/topics/accounts/messages/", {"body": "x"})

    assert response.status_code == 409
    assert error_of(response)["code"] == "wrong_topic_kind"
    assert produce.status_code == 409


@pytest.mark.parametrize(
    "query", ["from_version=0", "limit=0", "limit=5000", "from_version=x", "colour=red"]
)
def test_bad_read_queries_are_400(as_viewer, accounts, query):
    response = as_viewer.get(f"{EVENTS}?{query}")

    assert response.status_code == 400


def test_the_endpoint_is_in_the_schema(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    path = next(p for p in schema["paths"] if p.startswith("/api/v1/streams/"))
    assert set(schema["paths"][path]) >= {"get", "post"}
    assert "409" in schema["paths"][path]["post"]["responses"]
