"""/messages/ by time on a big topic (20,000 queues, TIDEMARK_BIG_TOPIC_QUEUES lowered to
1,000): without a queue range it is refused with a sentence and reads no queue; with one it
reads the queues of that range only, shows at most TIME_SHOWN messages and a page of the
per-queue table."""

from __future__ import annotations

import pytest

from console.messages import search
from tests.console.bigtopic import make_wide
from tests.console.queuecount import queues_touched

pytestmark = pytest.mark.django_db

EPOCH = "1970-01-01T00:00:00"


@pytest.fixture
def wide(settings, store):
    return make_wide(settings, store)


def test_a_time_search_over_a_big_topic_without_a_queue_range_is_refused(
    as_viewer, wide, monkeypatch
):
    with queues_touched(monkeypatch) as touched:
        response = as_viewer.get("/messages/", {"mode": "time", "topic": "wide", "at": EPOCH})

    assert response.context["results"] is None
    text = response.content.decode()
    assert "Topic wide has 20,000 queues: a search by time reads 1,000 queues at most" in text
    assert touched == set()


def test_a_time_search_over_a_queue_range_reads_only_those_queues(as_viewer, wide, monkeypatch):
    query = {"mode": "time", "topic": "wide", "at": EPOCH, "first_queue": 0, "last_queue": 999}
    with queues_touched(monkeypatch) as touched:
        response = as_viewer.get("/messages/", query)

    results = response.context["results"]
    assert touched <= set(range(1_000))
    assert [row.message.queue for row in results.rows] == list(range(0, 1_000, 50))
    assert len(results.queue_starts) == search.QUEUE_TABLE_PAGE


def test_the_per_queue_table_is_paged(as_viewer, wide):
    query = {
        "mode": "time",
        "topic": "wide",
        "at": EPOCH,
        "first_queue": 0,
        "last_queue": 999,
        "queue_page": 3,
    }
    response = as_viewer.get("/messages/", query)

    starts = response.context["results"].queue_starts
    assert [s.queue for s in starts] == list(range(200, 300))
    assert "queue_page=4" in response.content.decode()


def test_a_queue_range_wider_than_one_search_reads_is_refused(as_viewer, wide, monkeypatch):
    query = {"mode": "time", "topic": "wide", "at": EPOCH, "first_queue": 0, "last_queue": 1_000}
    with queues_touched(monkeypatch) as touched:
        response = as_viewer.get("/messages/", query)

    assert response.context["results"] is None
    assert "queues 0 to 1,000 are 1,001: narrow the range" in response.content.decode()
    assert touched == set()


def test_the_rows_shown_are_bounded_whatever_the_queues_hold(as_viewer, store, settings):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 1_000
    store.create_topic("deep", queues=100, layout="shared")
    store.append_batch("deep", [{"body": b"m", "queue": q % 100} for q in range(2_000)])

    response = as_viewer.get("/messages/", {"mode": "time", "topic": "deep", "at": EPOCH})

    assert len(response.context["results"].rows) == search.TIME_SHOWN
