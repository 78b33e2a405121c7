"""Issue 30, case 11 (the rest): the groups list and the dashboard's "furthest behind"
show each group's lag in seconds and consume rate from the monitoring samples, and the
groups list sorts by its columns (the topics list's sort mechanism)."""

from __future__ import annotations

import html

import pytest

from console.monitoring.sampler import take_sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled(store, now):
    """`billing` consumes `orders` at 1 message/s and is 20 behind; `stuck` committed
    once and stopped, 59 behind; `zeta` is caught up on `audit` (3 samples)."""
    store.create_topic("orders", 1)
    store.create_topic("audit", 1)
    store.append_batch("orders", [{"body": "m"} for _ in range(20)])
    store.append_batch("audit", [{"body": "a"}])
    store.commit_offset("billing", "orders", 0, 0)
    store.commit_offset("stuck", "orders", 0, 1)
    store.commit_offset("zeta", "audit", 0, 1)
    take_sample()
    for offset in (20, 40):
        now["ms"] += 20_000
        store.append_batch("orders", [{"body": "m"} for _ in range(20)])
        store.commit_offset("billing", "orders", 0, offset)
        take_sample()
    return store


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_groups_list_shows_sampled_lag_in_time_and_consume_rate(as_viewer, sampled):
    response = as_viewer.get("/groups/")

    rows = {row.group: row for row in response.context["rows"]}
    assert rows["billing"].consume_rate == pytest.approx(1.0)
    assert rows["stuck"].lag_seconds is not None and rows["stuck"].lag_seconds >= 40
    page = text(response)
    assert "Lag (time)" in page and "Consume rate" in page
    assert "1.0/s" in page


def test_the_groups_list_before_any_sample_shows_dashes(as_viewer, store):
    store.create_topic("orders", 1)
    store.append("orders", b"m")
    store.commit_offset("billing", "orders", 0, 0)

    response = as_viewer.get("/groups/")

    [row] = response.context["rows"]
    assert (row.lag_seconds, row.consume_rate) == (None, None)
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("lag", ["stuck", "billing", "zeta"]),
        ("name", ["billing", "stuck", "zeta"]),
        ("-name", ["zeta", "stuck", "billing"]),
        ("consume_rate", ["billing", "stuck", "zeta"]),
        ("lag_seconds", ["stuck", "billing", "zeta"]),
        ("status", ["billing", "stuck", "zeta"]),  # WARN, then OK by name
    ],
)
def test_the_groups_list_sorts_by_a_column(as_viewer, sampled, sort, order):
    response = as_viewer.get("/groups/", {"sort": sort})

    assert [row.group for row in response.context["rows"]] == order


def test_the_groups_list_headers_link_to_their_sort(as_viewer, sampled):
    page = text(as_viewer.get("/groups/", {"q": "i"}))

    for sort in ("name", "status", "lag_seconds", "consume_rate", "queues_behind", "topics"):
        assert f'href="?q=i&sort={sort}"' in page


def test_an_unknown_sort_lists_most_behind_first(as_viewer, sampled):
    response = as_viewer.get("/groups/", {"sort": "'; drop"})

    assert response.status_code == 200
    assert [row.group for row in response.context["rows"]] == ["stuck", "billing", "zeta"]


def test_the_dashboard_shows_lag_in_time_and_consume_rate_of_the_groups_behind(as_viewer, sampled):
    response = as_viewer.get("/")

    behind = {group.group: metrics for group, metrics in response.context["behind"]}
    assert behind["billing"].consume_rate == pytest.approx(1.0)
    page = text(response)
    assert "Lag (time)" in page and "Consume rate" in page and "1.0/s" in page
