"""/api/v1/topics/<topic>/messages/ (produce) and /api/v1/messages/<id>/ (one message)."""

from __future__ import annotations

import base64
import json

import pytest

from console.audit.models import AuditEntry
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

PRODUCE = "/api/v1/topics/orders/messages/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def stored(store, topic: str = "orders") -> list:
    """Every message of the topic, by queue then offset."""
    queues = store.topic(topic).queues
    return [m for q in range(queues) for m in store.read(topic, q, 0, 1000)]


def post_json(client, url: str, data) -> object:
    return client.post(url, data, format="json")


# Roles


@pytest.mark.parametrize("client_name", CLIENTS)
def test_producing_needs_the_operator_role(clients, orders, client_name):
    response = post_json(clients[client_name], PRODUCE, {"body": "hello"})

    assert response.status_code == expected_status(client_name, "operator", 201)
    assert len(stored(orders)) == (1 if response.status_code == 201 else 0)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_reading_a_message_needs_the_viewer_role(clients, orders, client_name):
    sent = orders.append("orders", b"hello")

    response = clients[client_name].get(f"/api/v1/messages/{sent.message_id}/")

    assert response.status_code == expected_status(client_name, "viewer", 200)


# Producing one message


def test_produce_one_message_answers_where_it_landed(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"body": "hello"})

    assert response.status_code == 201
    [result] = response.json()["results"]
    assert set(result) == {
        "message_id",
        "queue",
        "queue_offset",
        "commit_offset",
        "store_time_ms",
        "status",
    }
    assert result["status"] == "OK"
    message = orders.get(result["message_id"])
    assert (message.body, message.queue, message.queue_offset) == (
        b"hello",
        result["queue"],
        result["queue_offset"],
    )


def test_produce_keeps_key_tag_and_properties(as_operator, orders):
    response = post_json(
        as_operator,
        PRODUCE,
        {"body": "x", "key": "order-1", "tag": "created", "properties": {"region": "eu"}},
    )

    message = orders.get(response.json()["results"][0]["message_id"])
    assert (message.keys, message.tag, message.properties) == (
        ["order-1"],
        "created",
        {"region": "eu"},
    )


def test_produce_with_several_keys(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"body": "x", "keys": ["a", "b"]})

    assert orders.get(response.json()["results"][0]["message_id"]).keys == ["a", "b"]


def test_produce_into_a_chosen_queue(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"body": "x", "queue": 1})

    assert response.json()["results"][0]["queue"] == 1
    assert [m.body for m in orders.read("orders", 1, 0)] == [b"x"]


def test_null_optional_fields_mean_none(as_operator, orders):
    response = post_json(
        as_operator,
        PRODUCE,
        {"body": "x", "key": None, "tag": None, "properties": None, "queue": None},
    )

    assert response.status_code == 201
    message = orders.get(response.json()["results"][0]["message_id"])
    assert (message.keys, message.tag, message.properties) == ([], None, {})


def test_text_body_is_kept_exactly(as_operator, orders):
    body = "  line one\n\x00 ünïcode  "

    response = post_json(as_operator, PRODUCE, {"body": body})

    assert orders.get(response.json()["results"][0]["message_id"]).body == body.encode()


def test_empty_body_is_a_message(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"body": ""})

    assert response.status_code == 201
    assert orders.get(response.json()["results"][0]["message_id"]).body == b""


def test_base64_body_round_trips_through_the_api(as_operator, orders):
    raw = bytes(range(256))

    produced = post_json(
        as_operator, PRODUCE, {"body": base64.b64encode(raw).decode(), "encoding": "base64"}
    )
    message_id = produced.json()["results"][0]["message_id"]
    read = as_operator.get(f"/api/v1/messages/{message_id}/").json()

    assert orders.get(message_id).body == raw
    assert read["body_encoding"] == "base64"
    assert base64.b64decode(read["body"]) == raw


def test_same_dedup_id_twice_is_a_duplicate(as_operator, orders):
    message = {"body": "pay", "dedup_id": "payment-7"}

    first = post_json(as_operator, PRODUCE, message).json()["results"][0]
    second = post_json(as_operator, PRODUCE, message).json()["results"][0]

    assert (first["status"], second["status"]) == ("OK", "DUPLICATE")
    assert second["message_id"] == first["message_id"]
    assert len(stored(orders)) == 1


def test_producing_is_not_audited(as_operator, orders):
    post_json(as_operator, PRODUCE, {"body": "x"})
    post_json(as_operator, PRODUCE, {"messages": [{"body": "y"}]})

    assert AuditEntry.objects.count() == 0


# Producing a batch


def test_produce_a_batch_in_order(as_operator, orders):
    response = post_json(
        as_operator,
        PRODUCE,
        {"messages": [{"body": "a", "queue": 0}, {"body": "b", "queue": 0}, {"body": "c"}]},
    )

    assert response.status_code == 201
    results = response.json()["results"]
    assert len(results) == 3
    assert [orders.get(r["message_id"]).body for r in results] == [b"a", b"b", b"c"]
    assert [r["queue_offset"] for r in results[:2]] == [0, 1]


def test_batch_with_a_duplicate_inside_reports_it(as_operator, orders):
    orders.append("orders", b"old", dedup_id="d-1")

    response = post_json(
        as_operator,
        PRODUCE,
        {"messages": [{"body": "new"}, {"body": "again", "dedup_id": "d-1"}]},
    )

    assert [r["status"] for r in response.json()["results"]] == ["OK", "DUPLICATE"]
    assert len(stored(orders)) == 2


def test_batch_of_exactly_the_limit_is_written(as_operator, orders, settings):
    settings.TIDEMARK_API_MAX_BATCH = 3

    response = post_json(as_operator, PRODUCE, {"messages": [{"body": "m"}] * 3})

    assert response.status_code == 201
    assert len(stored(orders)) == 3


def test_batch_over_the_limit_is_refused_and_writes_nothing(as_operator, orders, settings):
    settings.TIDEMARK_API_MAX_BATCH = 3

    response = post_json(as_operator, PRODUCE, {"messages": [{"body": "m"}] * 4})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "batch_too_large"
    assert error["details"] == {"max_batch": 3}
    assert stored(orders) == []


def test_default_batch_limit_is_1000(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"messages": [{"body": ""}] * 1001})

    assert error_of(response)["code"] == "batch_too_large"
    assert stored(orders) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"body": 5},
        {"body": "!!not base64!!", "encoding": "base64"},
        {"body": "x", "properties": {"a": 1}},
        {"body": "x", "unknown": 1},
        {"tag": "no body"},
    ],
    ids=["number-body", "bad-base64", "number-property", "unknown-field", "no-body"],
)
def test_one_bad_message_in_a_batch_writes_none(as_operator, orders, bad):
    response = post_json(as_operator, PRODUCE, {"messages": [{"body": "good"}, bad]})

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
    assert stored(orders) == []


def test_batch_refused_by_the_engine_writes_none(as_operator, orders):
    response = post_json(
        as_operator, PRODUCE, {"messages": [{"body": "good"}, {"body": "x", "queue": 7}]}
    )

    assert error_of(response)["code"] == "queue_not_found"
    assert stored(orders) == []


@pytest.mark.parametrize(
    "data",
    [{"messages": []}, {"messages": {"body": "x"}}, {"messages": "x"}, {"messages": [5]}],
    ids=["empty", "object", "string", "number-item"],
)
def test_malformed_batch_is_refused(as_operator, orders, data):
    response = post_json(as_operator, PRODUCE, data)

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
    assert stored(orders) == []


def test_batch_with_body_beside_messages_is_refused(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"messages": [{"body": "a"}], "body": "b"})

    assert error_of(response)["details"]["fields"]["body"][0]["message"] == (
        "This field is not known."
    )
    assert stored(orders) == []


# Bad single messages: every one is a 400 in the one shape, and nothing is written.

BAD_MESSAGES = [
    ("missing-body", {"key": "k"}, "body"),
    ("number-body", {"body": 12}, "body"),
    ("null-body", {"body": None}, "body"),
    ("object-body", {"body": {"a": 1}}, "body"),
    ("unknown-encoding", {"body": "x", "encoding": "hex"}, "encoding"),
    ("malformed-base64", {"body": "abc", "encoding": "base64"}, "body"),
    ("base64-bad-chars", {"body": "????", "encoding": "base64"}, "body"),
    ("key-and-keys", {"body": "x", "key": "a", "keys": ["b"]}, "keys"),
    ("number-key", {"body": "x", "key": 5}, "key"),
    ("keys-not-a-list", {"body": "x", "keys": "a"}, "keys"),
    ("number-in-keys", {"body": "x", "keys": ["a", 1]}, "keys"),
    ("number-property", {"body": "x", "properties": {"a": 1}}, "properties"),
    ("null-property", {"body": "x", "properties": {"a": None}}, "properties"),
    ("properties-list", {"body": "x", "properties": ["a"]}, "properties"),
    ("empty-property-name", {"body": "x", "properties": {"": "v"}}, "properties"),
    ("negative-queue", {"body": "x", "queue": -1}, "queue"),
    ("string-queue", {"body": "x", "queue": "1"}, "queue"),
    ("float-queue", {"body": "x", "queue": 1.5}, "queue"),
    ("boolean-queue", {"body": "x", "queue": True}, "queue"),
    ("number-tag", {"body": "x", "tag": 3}, "tag"),
    ("number-dedup-id", {"body": "x", "dedup_id": 3}, "dedup_id"),
    ("unknown-field", {"body": "x", "priority": 1}, "priority"),
]


@pytest.mark.parametrize(
    "data,field", [(d, f) for _, d, f in BAD_MESSAGES], ids=[n for n, _, _ in BAD_MESSAGES]
)
def test_bad_message_is_a_400_naming_the_field(as_operator, orders, data, field):
    response = post_json(as_operator, PRODUCE, data)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"]
    assert stored(orders) == []


@pytest.mark.parametrize(
    "data",
    [
        {"body": "x", "tag": "t" * 300},
        {"body": "x", "key": ""},
        {"body": "x", "key": "a\x1fb"},
        {"body": "x", "properties": {"DEDUP_ID": "v"}},
        {"body": "x", "dedup_id": ""},
    ],
    ids=["long-tag", "empty-key", "separator-in-key", "reserved-property", "empty-dedup-id"],
)
def test_message_refused_by_the_engine_is_a_400(as_operator, orders, data):
    response = post_json(as_operator, PRODUCE, data)

    assert response.status_code == 400
    assert error_of(response)["code"] in ("invalid", "invalid_message")
    assert stored(orders) == []


def test_lone_surrogate_in_a_key_is_a_400(as_operator, orders):
    response = as_operator.post(
        PRODUCE, '{"body": "x", "key": "\\ud800"}', content_type="application/json"
    )

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
    assert stored(orders) == []


def test_lone_surrogate_in_a_property_name_is_a_400(as_operator, orders):
    response = as_operator.post(
        PRODUCE, '{"body": "x", "properties": {"\\udfff": "v"}}', content_type="application/json"
    )

    assert error_of(response)["code"] == "invalid"
    assert stored(orders) == []


@pytest.mark.parametrize("payload", ["[]", '"body"', "5", "null"])
def test_body_that_is_not_an_object_is_a_400(as_operator, orders, payload):
    response = as_operator.post(PRODUCE, payload, content_type="application/json")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"


def test_malformed_json_is_a_400(as_operator, orders):
    response = as_operator.post(PRODUCE, '{"body": ', content_type="application/json")

    assert error_of(response)["code"] == "malformed_request"


def test_form_encoded_body_is_a_415(as_operator, orders):
    response = as_operator.post(PRODUCE, {"body": "x"})

    assert response.status_code == 415
    assert error_of(response)["code"] == "unsupported_media_type"
    assert stored(orders) == []


def test_unknown_topic_is_a_404(as_operator, orders):
    response = post_json(as_operator, "/api/v1/topics/nope/messages/", {"body": "x"})

    assert response.status_code == 404
    assert error_of(response)["code"] == "topic_not_found"


def test_unknown_queue_is_a_404(as_operator, orders):
    response = post_json(as_operator, PRODUCE, {"body": "x", "queue": 2})

    assert response.status_code == 404
    assert error_of(response)["code"] == "queue_not_found"
    assert stored(orders) == []


def test_frozen_queue_is_a_409(as_operator, orders):
    orders.freeze_queue("orders", 1)

    response = post_json(as_operator, PRODUCE, {"body": "x", "queue": 1})

    assert response.status_code == 409
    assert error_of(response)["code"] == "queue_frozen"
    assert stored(orders) == []


def test_body_over_the_message_limit_is_a_413(as_operator, orders, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    limit = orders.config.max_message_bytes

    response = post_json(as_operator, PRODUCE, {"body": "x" * (limit + 1)})

    assert response.status_code == 413
    assert error_of(response)["code"] == "message_too_large"
    assert stored(orders) == []


# One message


def test_read_one_message(as_viewer, orders):
    sent = orders.append(
        "orders", b'{"total": 5}', key="order-1", tag="created", properties={"a": "1"}
    )

    response = as_viewer.get(f"/api/v1/messages/{sent.message_id}/")

    assert response.status_code == 200
    data = response.json()
    assert data["message_id"] == sent.message_id
    assert (data["topic"], data["queue"], data["queue_offset"]) == (
        "orders",
        sent.queue,
        sent.queue_offset,
    )
    assert (data["keys"], data["tag"], data["properties"]) == (["order-1"], "created", {"a": "1"})
    assert (data["body"], data["body_encoding"], data["body_bytes"]) == ('{"total": 5}', "text", 12)
    assert json.loads(data["body"]) == {"total": 5}


def test_malformed_message_id_is_a_400(as_viewer, orders):
    response = as_viewer.get("/api/v1/messages/not-an-id/")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_message_id"


def test_unknown_message_id_is_a_404(as_viewer, orders):
    sent = orders.append("orders", b"x")

    response = as_viewer.get(f"/api/v1/messages/{sent.message_id[:8]}00000000FFFFFFFF/")

    assert response.status_code == 404
    assert error_of(response)["code"] == "message_not_found"


def test_request_over_djangos_upload_limit_is_a_413(as_operator, orders, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = post_json(as_operator, PRODUCE, {"body": "x" * 2000})

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"
    assert stored(orders) == []
