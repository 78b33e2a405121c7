"""/topics/: each topic's size (bytes of the records it holds), from the monitoring
samples, after real appends and a retention pass; the column sorts."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.sampler import take_sample
from storeadapter.engine import clock

pytestmark = pytest.mark.django_db

HOUR_MS = 3_600_000
START_MS = 1_800_000_000_000


@pytest.fixture
def store_options() -> dict:
    return {"segment_bytes": 4096, "retention_hours": 72}


@pytest.fixture
def now(monkeypatch) -> dict:
    moment = {"ms": START_MS}
    monkeypatch.setattr(clock, "now_ms", lambda: moment["ms"])
    current._cache.update(token=None, groups=None)
    return moment


def _append(store, topic: str, count: int, body: bytes) -> list:
    return [store.append(topic, body, queue=i % 2) for i in range(count)]


def _record_size(results: list) -> int:
    return min(
        b.commit_offset - a.commit_offset for a, b in zip(results, results[1:], strict=False)
    )


def _row(response, name: str):
    return next(row for row in response.context["page"] if row.name == name)


def _sample(now: dict, at_ms: int) -> None:
    now["ms"] = at_ms
    current._cache.update(token=None, groups=None)
    assert take_sample().written


def test_each_topic_shows_the_bytes_of_its_records(store, now, as_viewer):
    store.create_topic("small", 2)
    store.create_topic("large", 2)
    small = _append(store, "small", 4, b"s" * 20)
    large = _append(store, "large", 6, b"l" * 400)
    _sample(now, START_MS)

    response = as_viewer.get("/topics/")

    assert _row(response, "small").size_bytes == 4 * _record_size(small)
    assert _row(response, "large").size_bytes == 6 * _record_size(large)
    assert "Size</a></th>" in response.content.decode()


def test_the_size_falls_after_a_retention_pass(store, now, as_viewer):
    store.create_topic("orders", 2)
    old = _append(store, "orders", 30, b"o" * 300)
    _sample(now, START_MS)
    before = _row(as_viewer.get("/topics/"), "orders").size_bytes
    now["ms"] = START_MS + 80 * HOUR_MS
    _append(store, "orders", 4, b"o" * 300)
    store.delete_expired()
    held = sum(high - low for low, high in store.queue_ranges("orders"))
    _sample(now, START_MS + 80 * HOUR_MS + 10_000)

    after = _row(as_viewer.get("/topics/"), "orders").size_bytes

    assert before == 30 * _record_size(old)
    assert after == held * _record_size(old) < before


def test_the_topics_sort_by_size(store, now, as_viewer):
    for name, count in (("a", 1), ("b", 5), ("c", 3)):
        store.create_topic(name, 2)
        _append(store, name, count, b"x" * 100)
    _sample(now, START_MS)

    response = as_viewer.get("/topics/", {"sort": "size"})

    assert [row.name for row in response.context["page"]] == ["b", "c", "a"]


def test_a_topic_not_sampled_yet_says_so(store, now, as_viewer):
    _sample(now, START_MS)
    store.create_topic("fresh", 1)

    response = as_viewer.get("/topics/")

    assert _row(response, "fresh").size_state == "unsampled"
    assert _row(response, "fresh").size_bytes is None


def test_a_topic_still_being_counted_says_counting(store, now, settings, as_viewer):
    settings.TIDEMARK_SIZE_ENTRY_BUDGET = 2
    store.create_topic("orders", 2)
    _append(store, "orders", 10, b"o" * 10)
    _sample(now, START_MS)

    response = as_viewer.get("/topics/")

    assert _row(response, "orders").size_state == "counting"
    assert "counting…" in response.content.decode()
