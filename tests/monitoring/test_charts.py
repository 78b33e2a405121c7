"""/monitoring/charts/<kind>/: each chart is a Plotly figure with the expected series."""

from __future__ import annotations

import json

import pytest
from django.template.loader import render_to_string

from console.monitoring.charts import resolution_for, thin

pytestmark = pytest.mark.django_db


def fill(store, topic: str, per_queue: list[int]) -> None:
    for queue, count in enumerate(per_queue):
        if count:
            store.append_batch(topic, [{"body": b"m", "queue": queue} for _ in range(count)])


@pytest.fixture
def sampled(store, clock, sample_at):
    """A topic with two queues and a group behind on it, sampled three times."""
    store.create_topic("orders", queues=2)
    for step in range(3):
        fill(store, "orders", [10, 10])
        clock.at(step * 10 + 5)
        store.commit_offset("billing", "orders", 0, 5 * (step + 1))
        sample_at(step * 10 + 10)
    return store


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return [trace["name"] for trace in json.loads(response.content)["data"]]


def points(response, name: str) -> list:
    trace = next(t for t in json.loads(response.content)["data"] if t["name"] == name)
    return trace["y"]


def test_the_dashboard_chart_has_rates_and_backlog(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/dashboard/")

    assert names(response) == ["Produce rate", "Consume rate", "Backlog"]
    assert points(response, "Produce rate") == [2.0, 2.0]  # 20 messages per 10 s
    assert len(points(response, "Backlog")) == 3


def test_the_group_chart_has_lag_per_queue_lag_seconds_drain_time_and_status(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/group/?group=billing&range=1h")

    assert names(response) == ["orders/0", "orders/1", "Lag (s)", "Drain time (s)", "Status"]
    assert points(response, "orders/0") == [5, 10, 15]
    assert points(response, "orders/1") == [10, 20, 30]


def test_the_group_chart_stacks_the_queues(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/group/?group=billing")
    traces = json.loads(response.content)["data"]

    assert {t.get("stackgroup") for t in traces if t["name"].startswith("orders/")} == {"lag"}


def test_the_topic_chart_has_append_rate_and_size(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/topic/?topic=orders&range=1h")

    assert names(response) == ["Append rate", "Size"]
    assert points(response, "Append rate") == [2.0, 2.0]
    assert points(response, "Size") == [20, 40, 60]


def test_a_longer_range_draws_one_point_per_minute(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/topic/?topic=orders&range=24h")

    assert points(response, "Size") == [60]  # three samples in one minute: the last


def test_the_storage_chart_has_disk_use_and_the_three_thresholds(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/storage/?range=7d")

    assert names(response) == ["Disk use", "Warn threshold", "Force threshold", "Reject threshold"]
    assert points(response, "Reject threshold") == [100.0, 100.0]  # the tests' store: 1.0


def test_a_chart_before_any_sample_says_so(as_viewer, db):
    response = as_viewer.get("/monitoring/charts/dashboard/")

    layout = json.loads(response.content)["layout"]
    assert "No samples" in layout["annotations"][-1]["text"]


def test_a_bad_range_is_a_400_with_a_sentence(as_viewer, db):
    response = as_viewer.get("/monitoring/charts/dashboard/?range=2w")

    assert response.status_code == 400
    assert "1h, 6h, 24h, 7d" in response.json()["error"]


def test_a_group_chart_needs_a_group(as_viewer, db):
    response = as_viewer.get("/monitoring/charts/group/")

    assert response.status_code == 400
    assert "group" in response.json()["error"]


def test_a_group_never_sampled_gets_an_empty_chart_that_says_so(as_viewer, sampled):
    response = as_viewer.get("/monitoring/charts/group/?group=nobody")

    assert response.status_code == 200
    figure = response.json()
    assert all(not trace.get("x") for trace in figure["data"])
    notes = [note["text"] for note in figure["layout"]["annotations"]]
    assert any("No samples" in note for note in notes), notes


def test_an_unknown_chart_is_a_404(as_viewer, db):
    assert as_viewer.get("/monitoring/charts/pie/").status_code == 404


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    response = client.get("/monitoring/charts/dashboard/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_user_without_a_role_is_refused(as_nobody):
    assert as_nobody.get("/monitoring/charts/dashboard/").status_code == 403


def test_each_range_is_drawn_at_the_tier_that_covers_it():
    assert [resolution_for(s) for s in (3600, 6 * 3600, 24 * 3600, 7 * 86400)] == [
        10,
        60,
        60,
        3600,
    ]


def test_thinning_keeps_the_last_row_of_each_bucket():
    class Row:
        def __init__(self, ts_ms):
            self.ts_ms = ts_ms

    rows = [Row(ts) for ts in (0, 10_000, 50_000, 60_000, 110_000, 130_000)]

    assert [r.ts_ms for r in thin(rows, 60)] == [50_000, 110_000, 130_000]


def test_the_partial_names_its_chart_url_and_offers_the_four_ranges():
    html = render_to_string(
        "monitoring/_chart.html", {"chart_kind": "group", "chart_group": "billing"}
    )

    assert 'data-chart-url="/monitoring/charts/group/?group=billing"' in html
    assert [f'data-range="{r}"' in html for r in ("1h", "6h", "24h", "7d")] == [True] * 4
    assert "data-auto-refresh" in html and "js/charts.js" in html and "plotly.min.js" in html
