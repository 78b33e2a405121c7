"""/api/v1/messages/ (search by key, queue range or time) and /api/v1/messages/export/."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from console.messages import exports, records, search
from storeadapter.engine import Message, clock
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/messages/"
EXPORT = "/api/v1/messages/export/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
#: 2024-05-01 12:00:00 UTC, in milliseconds.
T0 = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
MINUTE = 60_000


@pytest.fixture
def now(monkeypatch):
    """The store's clock, set by the test: `now["ms"] = ...` before appending."""
    current = {"ms": T0}
    monkeypatch.setattr(clock, "now_ms", lambda: current["ms"])
    return current


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def fill_queue(store, count: int, queue: int = 0) -> list[str]:
    results = store.append_batch("orders", [Message(f"m{i}", queue=queue) for i in range(count)])
    return [r.message_id for r in results]


def ids(response) -> list[str]:
    return [m["message_id"] for m in response.json()["results"]]


def offsets(response) -> list[int]:
    return [m["queue_offset"] for m in response.json()["results"]]


def lines_of(response) -> list[dict]:
    """The messages of an export (its last line, the trailer, left out)."""
    text = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    assert "export" in lines[-1]
    return lines[:-1]


# Roles


@pytest.mark.parametrize("client_name", CLIENTS)
def test_searching_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(SEARCH, {"topic": "orders", "queue": 0})

    assert response.status_code == expected_status(client_name, "viewer", 200)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_exporting_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(EXPORT, {"topic": "orders", "queue": 0})

    assert response.status_code == expected_status(client_name, "viewer", 200)


# By key


def test_search_by_key_finds_newest_first_with_a_count(as_viewer, orders):
    sent = [orders.append("orders", f"v{i}", key="k").message_id for i in range(3)]
    orders.append("orders", "other", key="other")

    response = as_viewer.get(SEARCH, {"topic": "orders", "key": "k"})

    assert response.status_code == 200
    assert ids(response) == sent[::-1]
    assert (response.json()["count"], response.json()["next"]) == (3, None)


def test_search_by_key_pages_with_links(as_viewer, orders):
    sent = [orders.append("orders", f"v{i}", key="k").message_id for i in range(5)]
    query = {"topic": "orders", "key": "k", "page_size": 2}

    first = as_viewer.get(SEARCH, query)
    second = as_viewer.get(first.json()["next"])
    back = as_viewer.get(second.json()["previous"])

    assert ids(first) == [sent[4], sent[3]]
    assert first.json()["count"] is None and first.json()["previous"] is None
    assert ids(second) == [sent[2], sent[1]]
    assert "page=2" in first.json()["next"]
    assert ids(back) == ids(first)


def test_search_by_key_between_times(as_viewer, orders, now):
    sent = []
    for minute in range(4):
        now["ms"] = T0 + minute * MINUTE
        sent.append(orders.append("orders", f"v{minute}", key="k").message_id)

    response = as_viewer.get(
        SEARCH,
        {"topic": "orders", "key": "k", "since": T0 + MINUTE, "until": "2024-05-01T12:02:00Z"},
    )

    assert ids(response) == [sent[2], sent[1]]


def test_key_search_past_10000_messages_is_a_400(as_viewer, orders):
    response = as_viewer.get(SEARCH, {"topic": "orders", "key": "k", "page": 21, "page_size": 500})

    assert response.status_code == 400
    assert error_of(response)["code"] == "search_too_deep"


# By queue range


def test_search_a_queue_range(as_viewer, orders):
    fill_queue(orders, 50)

    response = as_viewer.get(
        SEARCH, {"topic": "orders", "queue": 0, "from_offset": 10, "to_offset": 15}
    )

    assert offsets(response) == [10, 11, 12, 13, 14]
    assert (response.json()["count"], response.json()["next"]) == (5, None)


def test_queue_range_pages(as_viewer, orders):
    fill_queue(orders, 120)
    query = {"topic": "orders", "queue": 0, "page_size": 50}

    pages = [as_viewer.get(SEARCH, {**query, "page": n}) for n in (1, 2, 3)]

    assert [offsets(p)[0] for p in pages] == [0, 50, 100]
    assert len(offsets(pages[2])) == 20
    assert pages[0].json()["count"] == 120
    assert pages[2].json()["next"] is None and pages[2].json()["previous"] is not None


def test_queue_range_page_size_is_at_most_500(as_viewer, orders):
    fill_queue(orders, 600)

    response = as_viewer.get(SEARCH, {"topic": "orders", "queue": 0, "page_size": 10_000})

    assert len(offsets(response)) == 500
    assert response.json()["next"] is not None


def test_queue_range_is_clamped_to_the_queue(as_viewer, orders):
    fill_queue(orders, 30)

    response = as_viewer.get(
        SEARCH, {"topic": "orders", "queue": 0, "from_offset": 20, "to_offset": 9999}
    )

    assert offsets(response) == list(range(20, 30))
    assert response.json()["count"] == 10


def test_empty_queue_is_an_empty_first_page(as_viewer, orders):
    response = as_viewer.get(SEARCH, {"topic": "orders", "queue": 1})

    assert response.json() == {"count": 0, "next": None, "previous": None, "results": []}


def test_page_past_the_last_is_a_404(as_viewer, orders):
    fill_queue(orders, 3)

    response = as_viewer.get(SEARCH, {"topic": "orders", "queue": 0, "page": 2})

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


# By time


def test_search_by_time_merges_every_queue_oldest_first(as_viewer, orders, now):
    sent = []
    for minute in range(6):
        now["ms"] = T0 + minute * MINUTE
        sent.append(orders.append("orders", f"v{minute}", queue=minute % 2).message_id)

    response = as_viewer.get(
        SEARCH,
        {"topic": "orders", "since": "2024-05-01T12:01:00Z", "until": T0 + 4 * MINUTE},
    )

    assert ids(response) == sent[1:5]
    assert {m["queue"] for m in response.json()["results"]} == {0, 1}
    assert response.json()["count"] == 4


def test_search_by_time_pages_without_a_count(as_viewer, orders, now):
    sent = []
    for minute in range(5):
        now["ms"] = T0 + minute * MINUTE
        sent.append(orders.append("orders", f"v{minute}", queue=minute % 2).message_id)
    query = {"topic": "orders", "since": T0, "page_size": 2}

    first = as_viewer.get(SEARCH, query)
    third = as_viewer.get(SEARCH, {**query, "page": 3})

    assert ids(first) == sent[:2]
    assert first.json()["count"] is None and first.json()["next"] is not None
    assert ids(third) == sent[4:]
    assert third.json()["count"] == 5 and third.json()["next"] is None


def test_search_until_alone_starts_at_the_beginning(as_viewer, orders, now):
    for minute in range(3):
        now["ms"] = T0 + minute * MINUTE
        orders.append("orders", f"v{minute}", queue=0)

    response = as_viewer.get(SEARCH, {"topic": "orders", "until": "2024-05-01T12:01:00"})

    assert [m["body"] for m in response.json()["results"]] == ["v0", "v1"]


def test_search_by_time_reads_no_more_than_a_page_from_each_queue(orders, now):
    fill_queue(orders, 30, queue=0)
    fill_queue(orders, 30, queue=1)
    reads = []
    real_read = orders.read_result

    def counting_read(topic, queue, offset, max_messages=32, tag=None):
        result = real_read(topic, queue, offset, max_messages, tag)
        reads.append(len(result.messages))
        return result

    orders.read_result = counting_read
    try:
        found = search.time_page(orders, "orders", 0, None, 1, 5, range(2))
    finally:
        del orders.read_result

    assert len(found.messages) == 5
    assert sum(reads) <= 2 * 6


def test_time_search_past_10000_messages_is_a_400(as_viewer, orders):
    response = as_viewer.get(SEARCH, {"topic": "orders", "since": 0, "page": 101, "page_size": 100})

    assert error_of(response)["code"] == "search_too_deep"


# Bad searches: each a 400 with a sentence, or a 404 for what does not exist.

BAD_SEARCHES = [
    ("nothing", {}),
    ("topic-only", {"topic": "orders"}),
    ("no-topic", {"key": "k"}),
    ("key-and-queue", {"topic": "orders", "key": "k", "queue": 0}),
    ("queue-and-since", {"topic": "orders", "queue": 0, "since": 0}),
    ("offsets-without-queue", {"topic": "orders", "from_offset": 1}),
    ("from-after-to", {"topic": "orders", "queue": 0, "from_offset": 5, "to_offset": 2}),
    ("until-before-since", {"topic": "orders", "since": 2000, "until": 1000}),
    ("bad-time", {"topic": "orders", "since": "yesterday"}),
    ("negative-time", {"topic": "orders", "since": "-5"}),
    ("time-before-1970", {"topic": "orders", "since": "1969-12-31T23:59:59Z"}),
    ("time-too-far", {"topic": "orders", "since": "9" * 30}),
    ("negative-offset", {"topic": "orders", "queue": 0, "from_offset": -1}),
    ("queue-not-a-number", {"topic": "orders", "queue": "first"}),
    ("blank-key", {"topic": "orders", "key": ""}),
    ("bad-topic-name", {"topic": "no such topic!", "key": "k"}),
    ("unknown-parameter", {"topic": "orders", "key": "k", "id": "x"}),
    ("page-zero", {"topic": "orders", "queue": 0, "page": 0}),
    ("page-not-a-number", {"topic": "orders", "queue": 0, "page": "last"}),
]


@pytest.mark.parametrize("query", [q for _, q in BAD_SEARCHES], ids=[n for n, _ in BAD_SEARCHES])
def test_bad_search_is_a_400_with_a_sentence(as_viewer, orders, query):
    response = as_viewer.get(SEARCH, query)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert error["message"].endswith(".")


@pytest.mark.parametrize(
    "query,code",
    [
        ({"topic": "nope", "key": "k"}, "topic_not_found"),
        ({"topic": "nope", "since": 0}, "topic_not_found"),
        ({"topic": "nope", "queue": 0}, "topic_not_found"),
        ({"topic": "orders", "queue": 5}, "queue_not_found"),
    ],
    ids=["key", "time", "range", "queue"],
)
def test_search_of_something_unknown_is_a_404(as_viewer, orders, query, code):
    response = as_viewer.get(SEARCH, query)

    assert response.status_code == 404
    assert error_of(response)["code"] == code


# Export


def test_export_is_json_lines_in_the_consoles_format(as_viewer, orders):
    fill_queue(orders, 5)
    orders.append("orders", b"\x00\xff binary", key="k", queue=0)

    response = as_viewer.get(
        EXPORT, {"topic": "orders", "queue": 0, "from_offset": 2, "to_offset": 9}
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert 'filename="orders-queue0-2-6.jsonl"' in response["Content-Disposition"]
    expected = b"".join(records.export_line(m) for m in orders.read("orders", 0, 2, 10))
    assert b"".join(response.streaming_content).startswith(expected)


def test_export_lines_carry_base64_for_binary_bodies(as_viewer, orders):
    orders.append("orders", b"\x00\xff", queue=0)

    [line] = lines_of(as_viewer.get(EXPORT, {"topic": "orders", "queue": 0}))

    assert (line["body"], line["body_encoding"]) == ("AP8=", "base64")


def test_export_stops_at_the_export_limit(as_viewer, orders, monkeypatch):
    monkeypatch.setattr(exports, "DEFAULT_RECORDS", 4)
    fill_queue(orders, 10)

    lines = lines_of(as_viewer.get(EXPORT, {"topic": "orders", "queue": 0, "from_offset": 3}))

    assert [line["queue_offset"] for line in lines] == [3, 4, 5, 6]


def test_export_limit_is_10000():
    assert exports.DEFAULT_RECORDS == 10_000


def test_export_can_be_asked_for_by_its_media_type(as_viewer, orders):
    fill_queue(orders, 2)

    response = as_viewer.get(
        EXPORT, {"topic": "orders", "queue": 0}, HTTP_ACCEPT="application/x-ndjson"
    )

    assert response.status_code == 200
    assert len(lines_of(response)) == 2


@pytest.mark.parametrize(
    "query,status,code",
    [
        ({"topic": "orders"}, 400, "invalid"),
        ({"queue": 0}, 400, "invalid"),
        ({"topic": "orders", "queue": -1}, 400, "invalid"),
        ({"topic": "orders", "queue": 0, "from_offset": "x"}, 400, "invalid"),
        ({"topic": "orders", "queue": 0, "from_offset": 5, "to_offset": 1}, 400, "invalid"),
        ({"topic": "orders", "queue": 0, "key": "k"}, 400, "invalid"),
        ({"topic": "nope", "queue": 0}, 404, "topic_not_found"),
        ({"topic": "orders", "queue": 9}, 404, "queue_not_found"),
    ],
    ids=[
        "no-queue",
        "no-topic",
        "negative-queue",
        "offset-not-a-number",
        "from-after-to",
        "unknown-parameter",
        "unknown-topic",
        "unknown-queue",
    ],
)
def test_bad_export_is_a_4xx(as_viewer, orders, query, status, code):
    response = as_viewer.get(EXPORT, query)

    assert response.status_code == status
    assert error_of(response)["code"] == code


@pytest.mark.parametrize(
    "extra",
    [{"HTTP_ACCEPT": "application/x-ndjson"}, {}],
    ids=["accept-header", "format-parameter"],
)
def test_export_errors_are_json_even_when_json_lines_was_asked_for(as_viewer, orders, extra):
    query = {"topic": "nope", "queue": 0}
    if not extra:
        query["format"] = "jsonl"

    response = as_viewer.get(EXPORT, query, **extra)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert error_of(response)["code"] == "topic_not_found"
