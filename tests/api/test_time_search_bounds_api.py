"""/api/v1/messages/ by time on a big topic (20,000 queues, TIDEMARK_BIG_TOPIC_QUEUES lowered
to 1,000): refused without a queue range (the page's rule), bounded to the range with one."""

from __future__ import annotations

import pytest

from tests.api.apitools import error_of
from tests.console.bigtopic import make_wide
from tests.console.queuecount import queues_touched

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/messages/"


@pytest.fixture
def wide(settings, store):
    return make_wide(settings, store)


def test_a_time_search_over_a_big_topic_without_a_queue_range_is_a_400(
    as_viewer, wide, monkeypatch
):
    with queues_touched(monkeypatch) as touched:
        response = as_viewer.get(SEARCH, {"topic": "wide", "since": 0})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "search_too_wide"
    assert "a search by time reads 1,000 queues at most" in error["message"]
    assert touched == set()


def test_a_time_search_over_a_queue_range_reads_only_those_queues(as_viewer, wide, monkeypatch):
    query = {"topic": "wide", "since": 0, "first_queue": 1_000, "last_queue": 1_999}
    with queues_touched(monkeypatch) as touched:
        response = as_viewer.get(SEARCH, query)

    assert response.status_code == 200, response.content
    assert [m["queue"] for m in response.json()["results"]] == list(range(1_000, 2_000, 50))
    assert touched <= set(range(1_000, 2_000))


def test_a_queue_range_needs_a_search_by_time(as_viewer, wide):
    response = as_viewer.get(SEARCH, {"topic": "wide", "key": "k", "first_queue": 0})

    assert response.status_code == 400
    assert "first_queue and last_queue" in error_of(response)["message"]
