"""/monitoring/charts/topic-history/: messages and bytes per minute from the Spark
statistics job's TopicMinuteStats rows; and the topic page carries the chart."""

from __future__ import annotations

import json

import pytest

from console.monitoring.models import TopicMinuteStats
from tests.monitoring.conftest import BASE_MS

pytestmark = pytest.mark.django_db

MINUTE_MS = 60_000
URL = "/monitoring/charts/topic-history/"


@pytest.fixture
def history(clock):
    """Three minutes of statistics for ``orders`` ending ten minutes before now, and a row
    of another topic."""
    clock.at(3600)
    for minute, (messages, size) in enumerate([(10, 1000), (0, 0), (4, 80)]):
        if messages:
            TopicMinuteStats.objects.create(
                topic="orders",
                minute_ms=BASE_MS + (minute + 40) * MINUTE_MS,
                messages=messages,
                bytes=size,
                distinct_keys=1,
                size_histogram={"le_64": messages},
            )
    TopicMinuteStats.objects.create(
        topic="other", minute_ms=BASE_MS + 40 * MINUTE_MS, messages=99, bytes=99, distinct_keys=1
    )


def traces(response) -> dict[str, list]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return {trace["name"]: trace["y"] for trace in json.loads(response.content)["data"]}


def test_the_history_chart_draws_messages_and_bytes_per_minute(as_viewer, history):
    found = traces(as_viewer.get(URL, {"topic": "orders", "range": "1h"}))

    assert list(found) == ["Messages per minute", "Bytes per minute"]
    assert found["Messages per minute"] == [10, 4]
    assert found["Bytes per minute"] == [1000, 80]


def test_long_ranges_average_over_larger_buckets(as_viewer, history):
    for range_name in ("7d", "30d", "90d"):
        found = traces(as_viewer.get(URL, {"topic": "orders", "range": range_name}))
        # One bucket (an hour, or a day) holding all 14 messages.
        assert len(found["Messages per minute"]) == 1
    minutes_per_day = 24 * 60
    assert found["Messages per minute"] == [round(14 / minutes_per_day, 3)]


def test_a_topic_without_statistics_gets_an_empty_chart_that_says_so(as_viewer, history):
    response = as_viewer.get(URL, {"topic": "nope"})

    assert traces(response) == {"Messages per minute": [], "Bytes per minute": []}
    assert "No statistics in this range yet" in response.content.decode()


def test_mistakes(as_viewer, history):
    assert as_viewer.get(URL, {"topic": "orders", "range": "1y"}).status_code == 400
    assert as_viewer.get(URL).status_code == 400
    assert as_viewer.get("/monitoring/charts/topic/?topic=orders&range=1y").status_code == 400


def test_the_topic_page_carries_the_history_chart(as_viewer, store):
    store.create_topic("orders", 1)

    page = as_viewer.get("/topics/orders/").content.decode()

    assert 'data-chart-url="/monitoring/charts/topic/?topic=orders"' in page
    assert 'data-chart-url="/monitoring/charts/topic-history/?topic=orders"' in page
    assert "History (Spark statistics)" in page
