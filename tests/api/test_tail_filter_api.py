"""The live tail with a filter expression (issue 34, items 1 and 2): only matches are
shown, the others are neither shown nor counted dropped; a waiting poll waits on past
messages that do not match; a bad expression is a 400 with its position."""

from __future__ import annotations

import json
import threading

import pytest

from storeadapter.engine import Message
from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

TAIL = "/api/v1/topics/orders/tail/"


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def tail(client, **query):
    response = client.get(TAIL, query)
    assert response.status_code == 200, response.content
    return response.json()


def totals(answer: dict) -> list[int]:
    return [json.loads(m["body"])["total"] for m in answer["messages"]]


def test_a_filtered_tail_shows_only_the_matches(as_viewer, orders):
    cursor = tail(as_viewer)["cursor"]
    orders.append_batch(
        "orders", [Message(json.dumps({"total": t}), queue=t % 2) for t in (5, 50, 7, 70)]
    )

    answer = tail(as_viewer, cursor=cursor, filter="body.total > 10")

    assert totals(answer) == [50, 70] and answer["dropped"] == 0


def test_past_the_rate_cap_only_matches_count_as_dropped(as_viewer, orders):
    cursor = tail(as_viewer, rate=2)["cursor"]
    orders.append_batch("orders", [Message(json.dumps({"total": t})) for t in range(10)])

    answer = tail(as_viewer, rate=2, cursor=cursor, filter="body.total >= 5")

    assert totals(answer) == [8, 9] and answer["dropped"] == 3


def test_a_waiting_filtered_poll_waits_past_messages_that_do_not_match(as_viewer, orders):
    cursor = tail(as_viewer)["cursor"]

    def append() -> None:
        orders.append("orders", json.dumps({"total": 1}).encode(), queue=0)
        orders.append("orders", json.dumps({"total": 99}).encode(), queue=0)

    later = threading.Timer(0.3, append)
    later.start()
    answer = tail(as_viewer, cursor=cursor, wait=5, filter="body.total == 99", queues="0")
    later.join()

    assert totals(answer) == [99]


def test_a_filter_that_does_not_compile_is_a_400_with_its_position(as_viewer, orders):
    response = as_viewer.get(TAIL, {"filter": "body.total >"})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_filter" and error["details"]["position"] >= 11
