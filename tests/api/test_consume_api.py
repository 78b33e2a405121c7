"""/api/v1/topics/<topic>/queues/<queue>/messages/ (pull, long polling) and .../commit/."""

from __future__ import annotations

import threading
import time

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine import Message
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

PULL = "/api/v1/topics/orders/queues/0/messages/"
COMMIT = "/api/v1/topics/orders/queues/0/commit/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    """Topic orders: queue 0 holds m0..m4, queue 1 is empty."""
    store.create_topic("orders", queues=2)
    store.append_batch("orders", [Message(f"m{i}", queue=0) for i in range(5)])
    return store


def bodies_of(response) -> list[str]:
    return [m["body"] for m in response.json()["messages"]]


def commit(client, data: dict, url: str = COMMIT):
    return client.post(url, data, format="json")


# Roles


@pytest.mark.parametrize("client_name", CLIENTS)
def test_pulling_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(PULL, {"offset": 0})

    assert response.status_code == expected_status(client_name, "viewer", 200)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_committing_needs_the_operator_role(clients, orders, client_name):
    response = commit(clients[client_name], {"group": "billing", "offset": 3})

    assert response.status_code == expected_status(client_name, "operator", 200)
    expected = 3 if response.status_code == 200 else None
    assert orders.committed_offset("billing", "orders", 0) == expected


# Pulling


def test_pull_from_the_groups_committed_offset(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 2)

    response = as_viewer.get(PULL, {"group": "billing"})

    assert response.status_code == 200
    assert bodies_of(response) == ["m2", "m3", "m4"]
    assert (response.json()["next_offset"], response.json()["max_offset"]) == (5, 5)


def test_pull_for_a_group_that_never_committed_starts_at_the_first_offset(as_viewer, orders):
    response = as_viewer.get(PULL, {"group": "new-group"})

    assert bodies_of(response) == ["m0", "m1", "m2", "m3", "m4"]


def test_pull_from_an_offset_ignores_the_committed_one(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 4)

    response = as_viewer.get(PULL, {"group": "billing", "offset": 1, "max": 2})

    assert bodies_of(response) == ["m1", "m2"]
    assert response.json()["next_offset"] == 3


def test_pull_answers_messages_in_the_api_shape(as_viewer, orders):
    [message] = as_viewer.get(PULL, {"offset": 0, "max": 1}).json()["messages"]

    assert message["message_id"] == orders.read("orders", 0, 0, 1)[0].message_id
    assert (message["topic"], message["queue"], message["queue_offset"]) == ("orders", 0, 0)
    assert (message["body_encoding"], message["body_bytes"]) == ("text", 2)


def test_max_defaults_to_32(as_viewer, orders):
    orders.append_batch("orders", [Message("x", queue=1)] * 40)

    response = as_viewer.get("/api/v1/topics/orders/queues/1/messages/", {"offset": 0})

    assert len(response.json()["messages"]) == 32
    assert response.json()["next_offset"] == 32


def test_pulling_never_commits(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    as_viewer.get(PULL, {"group": "billing"})

    assert orders.committed_offset("billing", "orders", 0) == 1
    assert len(orders.offset_history("billing")) == 1


def test_pull_at_the_end_answers_nothing_at_once(as_viewer, orders):
    started = time.monotonic()
    response = as_viewer.get(PULL, {"offset": 5})

    assert time.monotonic() - started < 1
    assert response.json() == {"messages": [], "next_offset": 5, "max_offset": 5}


def test_long_poll_returns_when_a_message_arrives_within_wait(as_viewer, orders):
    def produce_later():
        time.sleep(0.3)
        orders.append("orders", b"late", queue=0)

    producer = threading.Thread(target=produce_later)
    started = time.monotonic()
    producer.start()
    try:
        response = as_viewer.get(PULL, {"offset": 5, "wait": 10})
    finally:
        producer.join()

    elapsed = time.monotonic() - started
    assert 0.2 < elapsed < 5
    assert bodies_of(response) == ["late"]
    assert response.json()["next_offset"] == 6


def test_long_poll_returns_empty_after_wait_when_nothing_comes(as_viewer, orders):
    started = time.monotonic()
    response = as_viewer.get(PULL, {"offset": 5, "wait": 0.3})

    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 3
    assert response.status_code == 200
    assert response.json() == {"messages": [], "next_offset": 5, "max_offset": 5}


BAD_PULLS = [
    ("wait-over-30", {"offset": 0, "wait": 30.5}, "wait"),
    ("negative-wait", {"offset": 0, "wait": -1}, "wait"),
    ("wait-not-a-number", {"offset": 0, "wait": "soon"}, "wait"),
    ("wait-nan", {"offset": 0, "wait": "nan"}, "wait"),
    ("max-zero", {"offset": 0, "max": 0}, "max"),
    ("max-over-1000", {"offset": 0, "max": 1001}, "max"),
    ("max-not-a-number", {"offset": 0, "max": "all"}, "max"),
    ("negative-offset", {"offset": -1}, "offset"),
    ("offset-not-a-number", {"offset": "first"}, "offset"),
    ("bad-group-name", {"group": "bad name!"}, "group"),
    ("unknown-parameter", {"offset": 0, "commit": "yes"}, "commit"),
]


@pytest.mark.parametrize(
    "query,field", [(q, f) for _, q, f in BAD_PULLS], ids=[n for n, _, _ in BAD_PULLS]
)
def test_bad_pull_parameter_is_a_400_naming_it(as_viewer, orders, query, field):
    response = as_viewer.get(PULL, query)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"]


def test_pull_without_offset_or_group_is_a_400(as_viewer, orders):
    response = as_viewer.get(PULL)

    assert response.status_code == 400
    assert "group" in error_of(response)["message"]


def test_pull_past_the_end_of_the_queue_is_a_400(as_viewer, orders):
    response = as_viewer.get(PULL, {"offset": 6})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "offset_out_of_range"
    assert error["details"] == {"min_offset": 0, "max_offset": 5}


@pytest.mark.parametrize(
    "url,code",
    [
        ("/api/v1/topics/nope/queues/0/messages/", "topic_not_found"),
        ("/api/v1/topics/orders/queues/7/messages/", "queue_not_found"),
    ],
)
def test_pull_from_an_unknown_topic_or_queue_is_a_404(as_viewer, orders, url, code):
    response = as_viewer.get(url, {"offset": 0})

    assert response.status_code == 404
    assert error_of(response)["code"] == code


def test_pull_from_a_negative_queue_is_a_404(as_viewer, orders):
    response = as_viewer.get("/api/v1/topics/orders/queues/-1/messages/", {"offset": 0})

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


# Committing


def test_first_commit_has_no_previous_offset(as_operator, orders):
    response = commit(as_operator, {"group": "billing", "offset": 3})

    assert response.status_code == 200
    assert response.json() == {
        "group": "billing",
        "topic": "orders",
        "queue": 0,
        "offset": 3,
        "previous": None,
    }
    assert orders.committed_offset("billing", "orders", 0) == 3


def test_commit_answers_the_previous_offset(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    response = commit(as_operator, {"group": "billing", "offset": 4})

    assert (response.json()["offset"], response.json()["previous"]) == (4, 1)


def test_commit_of_the_same_offset_changes_nothing(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 2)

    response = commit(as_operator, {"group": "billing", "offset": 2})

    assert response.json()["previous"] == 2
    assert len(orders.offset_history("billing")) == 1


def test_commit_is_journalled_with_the_user_and_audited(as_operator, orders):
    commit(as_operator, {"group": "billing", "offset": 3})

    [change] = orders.offset_history("billing")
    assert (change.who, change.reason, change.new) == ("otto", "api commit", 3)
    assert AuditEntry.objects.filter(action="offset.commit").count() == 1


def test_commit_to_the_end_offset_is_allowed(as_operator, orders):
    response = commit(as_operator, {"group": "billing", "offset": 5})

    assert response.status_code == 200


def test_commit_with_the_expected_offset(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    response = commit(as_operator, {"group": "billing", "offset": 3, "expected": 1})

    assert response.status_code == 200
    assert orders.committed_offset("billing", "orders", 0) == 3


def test_commit_expecting_never_committed(as_operator, orders):
    response = commit(as_operator, {"group": "billing", "offset": 3, "expected": None})

    assert response.status_code == 200
    assert orders.committed_offset("billing", "orders", 0) == 3


def test_commit_with_another_expected_offset_is_a_409(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 2)

    response = commit(as_operator, {"group": "billing", "offset": 4, "expected": 1})

    assert response.status_code == 409
    assert error_of(response)["code"] == "offset_conflict"
    assert orders.committed_offset("billing", "orders", 0) == 2


def test_commit_expecting_never_committed_after_a_commit_is_a_409(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 2)

    response = commit(as_operator, {"group": "billing", "offset": 4, "expected": None})

    assert error_of(response)["code"] == "offset_conflict"
    assert orders.committed_offset("billing", "orders", 0) == 2


@pytest.mark.parametrize("offset", [-1, 6, 10**30], ids=["negative", "past-the-end", "huge"])
def test_commit_outside_the_queue_is_a_400(as_operator, orders, offset):
    response = commit(as_operator, {"group": "billing", "offset": offset})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "offset_out_of_range"
    assert error["details"] == {"min_offset": 0, "max_offset": 5}
    assert orders.committed_offset("billing", "orders", 0) is None


BAD_COMMITS = [
    ("missing-group", {"offset": 1}, "group"),
    ("missing-offset", {"group": "billing"}, "offset"),
    ("string-offset", {"group": "billing", "offset": "1"}, "offset"),
    ("float-offset", {"group": "billing", "offset": 1.5}, "offset"),
    ("boolean-offset", {"group": "billing", "offset": True}, "offset"),
    ("null-offset", {"group": "billing", "offset": None}, "offset"),
    ("number-group", {"group": 5, "offset": 1}, "group"),
    ("bad-group-name", {"group": "a b", "offset": 1}, "group"),
    ("negative-expected", {"group": "billing", "offset": 1, "expected": -1}, "expected"),
    ("string-expected", {"group": "billing", "offset": 1, "expected": "0"}, "expected"),
    ("unknown-field", {"group": "billing", "offset": 1, "force": True}, "force"),
]


@pytest.mark.parametrize(
    "data,field", [(d, f) for _, d, f in BAD_COMMITS], ids=[n for n, _, _ in BAD_COMMITS]
)
def test_bad_commit_is_a_400_naming_the_field(as_operator, orders, data, field):
    response = commit(as_operator, data)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"]
    assert orders.committed_offset("billing", "orders", 0) is None


@pytest.mark.parametrize(
    "url,code",
    [
        ("/api/v1/topics/nope/queues/0/commit/", "topic_not_found"),
        ("/api/v1/topics/orders/queues/7/commit/", "queue_not_found"),
    ],
)
def test_commit_on_an_unknown_topic_or_queue_is_a_404(as_operator, orders, url, code):
    response = commit(as_operator, {"group": "billing", "offset": 0}, url)

    assert response.status_code == 404
    assert error_of(response)["code"] == code
