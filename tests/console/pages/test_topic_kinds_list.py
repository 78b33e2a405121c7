"""/topics/: each topic's kind and produce rate; a group's %RETRY% topics apart from the
ordinary ones; every column sorts."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.sampler import take_sample
from storeadapter.engine import clock

pytestmark = pytest.mark.django_db


@pytest.fixture
def store_options() -> dict:
    return {"segment_bytes": 4096, "max_message_bytes": 1024, "stream_index_slots": 64}


@pytest.fixture
def kinds(store):
    store.create_topic("orders", 2)
    store.create_stream_topic("ledger", 2)
    store.create_topic("%RETRY%billing", 1)
    store.create_topic("%DLQ%billing", 1)
    return store


def _names(response) -> list[str]:
    return [row.name for row in response.context["page"]]


def _row(response, name: str):
    return next(row for row in response.context["page"] if row.name == name)


def test_each_topic_shows_its_kind(kinds, as_viewer):
    response = as_viewer.get("/topics/", {"kind": "all"})

    assert {row.name: row.kind for row in response.context["page"]} == {
        "%DLQ%billing": "dlq",
        "%RETRY%billing": "retry",
        "ledger": "stream",
        "orders": "plain",
    }
    assert '<td class="tm-kind">stream</td>' in response.content.decode()


def test_retry_topics_are_not_listed_with_the_ordinary_topics(kinds, as_viewer):
    response = as_viewer.get("/topics/")

    assert "%RETRY%billing" not in _names(response)
    assert set(_names(response)) == {"%DLQ%billing", "ledger", "orders"}
    assert "1 group retry topic not listed" in response.content.decode()


def test_retry_topics_are_listed_on_their_own_and_marked(kinds, as_viewer):
    response = as_viewer.get("/topics/", {"kind": "retry"})

    assert _names(response) == ["%RETRY%billing"]
    assert "a group's retry topic" in response.content.decode()


def test_an_unknown_kind_filter_lists_the_ordinary_topics(kinds, as_viewer):
    assert "%RETRY%billing" not in _names(as_viewer.get("/topics/", {"kind": "nope"}))


def test_the_produce_rate_comes_from_the_samples(kinds, as_viewer, monkeypatch):
    now = {"ms": 1_800_000_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    current._cache.update(token=None, groups=None)
    take_sample()
    kinds.append_batch("orders", [{"body": "m", "queue": i % 2} for i in range(50)])
    now["ms"] += 10_000
    take_sample()

    response = as_viewer.get("/topics/")

    assert _row(response, "orders").produce_rate == 5.0
    assert _row(response, "ledger").produce_rate == 0.0
    assert "5.0/s" in response.content.decode()


def test_before_two_samples_the_rate_is_not_known(kinds, as_viewer):
    response = as_viewer.get("/topics/")

    assert _row(response, "orders").produce_rate is None


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("kind", ["orders", "ledger", "%DLQ%billing"]),
        ("-name", ["orders", "ledger", "%DLQ%billing"]),
        ("messages", ["orders", "%DLQ%billing", "ledger"]),
    ],
)
def test_the_list_sorts_by_a_column(kinds, as_viewer, sort, expected):
    kinds.append("orders", b"m")

    assert _names(as_viewer.get("/topics/", {"sort": sort})) == expected


def test_the_column_headers_are_sort_links(kinds, as_viewer):
    page = as_viewer.get("/topics/").content.decode()

    for sort in ("-name", "kind", "queues", "messages", "produce_rate", "last_write"):
        assert f'href="?sort={sort}"' in page


def test_the_header_links_keep_the_search_and_drop_the_page(kinds, as_viewer):
    response = as_viewer.get("/topics/?q=r&kind=all&sort=name&page=1")

    html = response.content.decode()
    assert 'href="?q=r&amp;kind=all&amp;sort=-name">Topic</a>' in html
    for sort in ("kind", "queues", "messages", "produce_rate", "size", "last_write"):
        assert f'href="?q=r&amp;kind=all&amp;sort={sort}"' in html, sort
