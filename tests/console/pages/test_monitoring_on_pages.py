"""The sampled metrics on the pages: rates on the dashboard, Burrow statuses on the group
pages, lag in time, drain time, and a chart on each page that has one."""

import html

import pytest

from console.monitoring.sampler import take_sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled(store, now):
    """`billing` keeps up with `orders`; `stuck` committed twice and stopped. Three
    samples (Burrow judges a queue from two commits at least)."""
    store.create_topic("orders", 2)
    store.append_batch("orders", [{"body": "m", "queue": i % 2} for i in range(20)])
    store.commit_offset("billing", "orders", 0, 10)
    store.commit_offset("billing", "orders", 1, 10)
    store.commit_offset("stuck", "orders", 0, 1)
    take_sample()
    now["ms"] += 10_000
    store.append_batch("orders", [{"body": "m", "queue": i % 2} for i in range(20)])
    store.commit_offset("billing", "orders", 0, 20)
    store.commit_offset("billing", "orders", 1, 20)
    store.commit_offset("stuck", "orders", 0, 2)
    now["ms"] += 10_000
    take_sample()
    store.append_batch("orders", [{"body": "m", "queue": i % 2} for i in range(20)])
    store.commit_offset("billing", "orders", 0, 30)
    store.commit_offset("billing", "orders", 1, 30)
    now["ms"] += 20_000
    take_sample()
    return store


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_dashboard_says_rates_are_not_sampled_before_the_first_sample(as_viewer, store):
    page = text(as_viewer.get("/"))

    assert "Produce rate" in page
    assert "not sampled yet" in page


def test_the_dashboard_shows_produce_and_consume_rates(as_viewer, sampled):
    response = as_viewer.get("/")

    rates = response.context["rates"]
    assert rates.produce_rate == pytest.approx(1.0)  # 20 messages in 20 s
    assert "1.0 messages/s" in text(response)


def test_the_dashboard_shows_the_status_of_the_groups_behind(as_viewer, sampled):
    behind = {g.group: m.status for g, m in as_viewer.get("/").context["behind"]}

    assert behind == {"stuck": "ERR", "billing": "OK"}


def test_the_group_list_has_a_status_column(as_viewer, sampled):
    response = as_viewer.get("/groups/")

    assert {row.group: row.status for row in response.context["rows"]} == {
        "stuck": "ERR",
        "billing": "OK",
    }
    assert 'class="tm-status tm-status-err"' in response.content.decode()


def test_the_group_list_filters_by_name_and_topic(as_viewer, sampled):
    by_name = as_viewer.get("/groups/", {"q": "BILL"}).context["rows"]
    by_topic = as_viewer.get("/groups/", {"topic": "nope"}).context["rows"]

    assert [row.group for row in by_name] == ["billing"]
    assert by_topic == []


def test_the_group_page_shows_status_lag_in_time_and_drain_time(as_viewer, sampled):
    response = as_viewer.get("/groups/stuck/")

    page = text(response)
    assert response.context["metrics"].status == "ERR"
    assert "not draining" in page
    rows = [r for t in response.context["topic_tables"] for r in t["rows"]]
    assert [r.status for r in rows] == ["STOP", None]  # never committed on: left out
    assert rows[0].lag_seconds is not None


def test_a_group_page_before_any_sample_says_so(as_viewer, store):
    store.create_topic("orders", 1)
    store.append("orders", "m")
    store.commit_offset("g", "orders", 0, 1)

    assert "not sampled yet" in text(as_viewer.get("/groups/g/"))


@pytest.mark.parametrize(
    "url, chart",
    [
        ("/", "/monitoring/charts/dashboard/"),
        ("/groups/stuck/", "/monitoring/charts/group/?group=stuck"),
        ("/topics/orders/", "/monitoring/charts/topic/?topic=orders"),
        ("/storage/", "/monitoring/charts/storage/"),
    ],
)
def test_each_page_with_history_carries_its_chart(as_viewer, sampled, url, chart):
    page = as_viewer.get(url).content.decode()

    assert f'data-chart-url="{chart}"' in page
    assert "plotly.min.js" in page
