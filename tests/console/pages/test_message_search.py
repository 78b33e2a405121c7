"""/messages/: search by id, key, queue range and time; JSON Lines export."""

import base64
import json
from datetime import UTC, datetime

import pytest
from django.apps.config import AppConfig

from console.messages import search
from storeadapter.engine import Message, clock

pytestmark = [pytest.mark.django_db]

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


def local(ms: int) -> str:
    """A time as a datetime-local input sends it (UTC)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def ids(response) -> list[str]:
    return [row.message.message_id for row in response.context["results"].rows]


def offsets(response) -> list[int]:
    return [row.message.queue_offset for row in response.context["results"].rows]


def fill_queue(store, count: int, topic: str = "orders", queue: int = 0) -> None:
    store.append_batch(topic, [Message(f"m{i}".encode(), queue=queue) for i in range(count)])


# Access


def test_anonymous_is_sent_to_login(client, store):
    response = client.get("/messages/?mode=key")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/messages/")


def test_user_without_role_gets_403(as_nobody, store):
    assert as_nobody.get("/messages/").status_code == 403


def test_post_is_not_allowed(as_operator, store):
    assert as_operator.post("/messages/", {"id": "x"}).status_code == 405


def test_empty_form_shows_the_id_mode_with_a_labelled_field(as_viewer, store):
    response = as_viewer.get("/messages/")

    assert response.status_code == 200
    assert response.context["results"] is None
    assert not response.context["form"].errors
    assert b'<label for="id_id">Message id</label>' in response.content
    assert b"autofocus" in response.content


def test_mode_tab_shows_that_modes_fields(as_viewer, store):
    response = as_viewer.get("/messages/?mode=range")

    assert [field.name for field in response.context["form"].active_fields()] == [
        "topic",
        "queue",
        "from",
        "to",
    ]
    assert not response.context["form"].errors


def test_app_config_has_its_own_label():
    assert AppConfig.create("console.messages").label == "tidemark_messages"


# By id


def test_search_by_id_finds_the_message(as_viewer, orders):
    sent = orders.append("orders", b"hello world", key="order-1", tag="created")

    response = as_viewer.get("/messages/", {"mode": "id", "id": sent.message_id})

    assert response.status_code == 200
    assert ids(response) == [sent.message_id]
    assert f'href="/messages/{sent.message_id}/"'.encode() in response.content
    assert b"hello world" in response.content
    assert b"order-1" in response.content


def test_malformed_id_is_a_form_error(as_viewer, orders):
    response = as_viewer.get("/messages/", {"mode": "id", "id": "not-an-id"})

    assert response.status_code == 200
    assert response.context["results"] is None
    assert "is not a message id" in response.context["form"].errors["id"][0]


def test_unknown_id_is_a_form_error_with_the_engines_sentence(as_viewer, orders):
    sent = orders.append("orders", b"x")
    unknown = sent.message_id[:8] + "00000000FFFFFFFF"

    response = as_viewer.get("/messages/", {"id": unknown})

    assert response.status_code == 200
    assert "outside the commit log" in response.context["form"].errors["id"][0]


# By key


def test_search_by_key_finds_newest_first(as_viewer, orders, now):
    sent = []
    for minute in range(3):
        now["ms"] = T0 + minute * MINUTE
        sent.append(orders.append("orders", f"v{minute}", key="order-7").message_id)
    orders.append("orders", b"other", key="order-8")

    response = as_viewer.get("/messages/", {"mode": "key", "topic": "orders", "key": "order-7"})

    assert ids(response) == list(reversed(sent))


def test_search_by_key_respects_the_time_range(as_viewer, orders, now):
    sent = []
    for minute in range(5):
        now["ms"] = T0 + minute * MINUTE
        sent.append(orders.append("orders", f"v{minute}", key="k").message_id)

    response = as_viewer.get(
        "/messages/",
        {
            "mode": "key",
            "topic": "orders",
            "key": "k",
            "since": local(T0 + MINUTE),
            "until": local(T0 + 3 * MINUTE),
        },
    )

    assert ids(response) == [sent[3], sent[2], sent[1]]


def test_search_by_key_pages_newest_first(as_viewer, orders, monkeypatch):
    monkeypatch.setattr(search, "KEY_PAGE", 2)
    sent = [orders.append("orders", f"v{i}", key="k").message_id for i in range(5)]
    query = {"mode": "key", "topic": "orders", "key": "k"}

    first = as_viewer.get("/messages/", query)
    second = as_viewer.get("/messages/", {**query, "page": 2})

    assert ids(first) == [sent[4], sent[3]]
    assert ids(second) == [sent[2], sent[1]]
    assert b'rel="next"' in second.content and b'rel="prev"' in second.content


def test_until_before_since_is_a_form_error(as_viewer, orders):
    response = as_viewer.get(
        "/messages/",
        {"mode": "key", "topic": "orders", "key": "k", "since": local(T0), "until": local(T0 - 1)},
    )

    assert "until" in response.context["form"].errors


def test_key_mode_needs_a_key(as_viewer, orders):
    response = as_viewer.get("/messages/", {"mode": "key", "topic": "orders"})

    assert response.context["form"].errors["key"] == ["This field is required."]


# By queue range


def test_queue_range_of_600_messages_is_two_pages(as_viewer, orders):
    fill_queue(orders, 600)
    query = {"mode": "range", "topic": "orders", "queue": 0}

    first = as_viewer.get("/messages/", query)
    second = as_viewer.get("/messages/", {**query, "page": 2})

    assert offsets(first) == list(range(500))
    assert offsets(second) == list(range(500, 600))
    assert first.context["results"].page.paginator.num_pages == 2
    assert b'rel="next"' in first.content and b'rel="prev"' not in first.content
    assert b'rel="prev"' in second.content and b'rel="next"' not in second.content


def test_queue_range_honours_from_and_to(as_viewer, orders):
    fill_queue(orders, 50)

    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": 0, "from": 10, "to": 15}
    )

    assert offsets(response) == [10, 11, 12, 13, 14]


def test_queue_range_clamps_to_the_queues_end_and_says_so(as_viewer, orders):
    fill_queue(orders, 30)

    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": 0, "from": 20, "to": 9999}
    )

    assert offsets(response) == list(range(20, 30))
    assert "ends before offset 9,999" in response.context["results"].notes[0]


def test_queue_range_from_past_the_end_shows_nothing_and_says_so(as_viewer, orders):
    fill_queue(orders, 5)

    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": 0, "from": 100}
    )

    assert offsets(response) == []
    assert "past the end of queue 0" in response.context["results"].notes[0]


def test_queue_range_page_past_the_last_shows_the_last(as_viewer, orders):
    fill_queue(orders, 600)

    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": 0, "page": 99}
    )

    assert offsets(response) == list(range(500, 600))


def test_unknown_queue_is_a_form_error(as_viewer, orders):
    response = as_viewer.get("/messages/", {"mode": "range", "topic": "orders", "queue": 9})

    assert response.status_code == 200
    assert "there is no queue 9" in response.context["form"].errors["queue"][0]


def test_bad_numbers_are_form_errors(as_viewer, orders):
    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": "two", "from": "-1"}
    )

    errors = response.context["form"].errors
    assert response.status_code == 200
    assert set(errors) == {"queue", "from"}


def test_from_after_to_is_a_form_error(as_viewer, orders):
    response = as_viewer.get(
        "/messages/", {"mode": "range", "topic": "orders", "queue": 0, "from": 9, "to": 3}
    )

    assert "to" in response.context["form"].errors


def test_results_show_the_store_time_and_a_body_preview(as_viewer, orders, now):
    now["ms"] = T0 + 1234
    orders.append("orders", "é" * 100, queue=0)
    orders.append("orders", b"\xff\xfe\x00\x01", queue=0)

    response = as_viewer.get("/messages/", {"mode": "range", "topic": "orders", "queue": 0})

    previews = [row.preview for row in response.context["results"].rows]
    assert previews == ["é" * 80 + "…", "binary, 4 bytes"]
    assert b"2024-05-01 12:00:01.234" in response.content


# By time


def test_search_by_time_returns_messages_from_that_time_on(as_viewer, orders, now):
    for minute in range(6):
        now["ms"] = T0 + minute * MINUTE
        orders.append("orders", f"v{minute}", queue=minute % 2)

    response = as_viewer.get(
        "/messages/", {"mode": "time", "topic": "orders", "at": local(T0 + 2 * MINUTE)}
    )

    rows = response.context["results"].rows
    assert [row.message.body for row in rows] == [b"v2", b"v3", b"v4", b"v5"]
    assert {row.message.queue for row in rows} == {0, 1}


def test_search_by_time_reads_at_most_20_per_queue(as_viewer, orders):
    fill_queue(orders, 30, queue=0)
    fill_queue(orders, 3, queue=1)

    response = as_viewer.get("/messages/", {"mode": "time", "topic": "orders", "at": local(0)})

    rows = response.context["results"].rows
    assert len(rows) == 23
    assert [start.offset for start in response.context["results"].queue_starts] == [0, 0]


def test_bad_time_is_a_form_error(as_viewer, orders):
    response = as_viewer.get("/messages/", {"mode": "time", "topic": "orders", "at": "soon"})

    assert response.status_code == 200
    assert "at" in response.context["form"].errors


# Unknown topic


@pytest.mark.parametrize(
    "query",
    [
        {"mode": "key", "key": "k"},
        {"mode": "range", "queue": 0},
        {"mode": "time", "at": "2024-05-01T12:00"},
    ],
)
def test_unknown_topic_is_a_form_error(as_viewer, orders, query):
    response = as_viewer.get("/messages/", {**query, "topic": "nope"})

    assert response.status_code == 200
    assert response.context["form"].errors["topic"] == ["topic 'nope' does not exist"]
    assert response.context["results"] is None


# Export


def read_lines(response) -> list[dict]:
    """The messages of an export (its last line, the trailer, left out)."""
    data = b"".join(response.streaming_content)
    lines = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    assert "export" in lines[-1]
    return lines[:-1]


def test_export_returns_json_lines_with_base64_for_binary_bodies(as_viewer, orders):
    fill_queue(orders, 10)
    orders.append("orders", b"\x00\xff binary", queue=0, key="k", properties={"a": "1"})

    response = as_viewer.get(
        "/messages/export/", {"topic": "orders", "queue": 0, "from": 2, "to": 11}
    )

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    lines = read_lines(response)
    assert [line["queue_offset"] for line in lines] == list(range(2, 11))
    assert (lines[0]["body"], lines[0]["body_encoding"]) == ("m2", "text")
    assert lines[-1]["body_encoding"] == "base64"
    assert base64.b64decode(lines[-1]["body"]) == b"\x00\xff binary"
    assert (lines[-1]["keys"], lines[-1]["properties"]) == (["k"], {"a": "1"})


def test_export_stops_at_10000_messages(as_viewer, orders):
    fill_queue(orders, 10_050)

    response = as_viewer.get("/messages/export/", {"topic": "orders", "queue": 0})

    data = b"".join(response.streaming_content).decode("utf-8").splitlines()
    lines, trailer = data[:-1], json.loads(data[-1])["export"]
    assert len(lines) == 10_000
    assert json.loads(lines[-1])["queue_offset"] == 9_999
    assert trailer["next"] == {"from": 10_000}


def test_queue_range_results_link_to_the_export(as_viewer, orders):
    fill_queue(orders, 3)

    response = as_viewer.get("/messages/", {"mode": "range", "topic": "orders", "queue": 0})

    assert response.context["results"].export_url == (
        "/messages/export/?topic=orders&queue=0&from=0&to=3"
    )
    assert b"Export JSON Lines" in response.content


def test_export_with_bad_parameters_shows_form_errors(as_viewer, orders):
    response = as_viewer.get("/messages/export/", {"topic": "nope", "queue": "x"})

    assert response.status_code == 400
    assert set(response.context["form"].errors) == {"topic", "queue"}


def test_export_needs_a_role(as_nobody, orders):
    response = as_nobody.get("/messages/export/", {"topic": "orders", "queue": 0})

    assert response.status_code == 403
