"""GET /api/v1/topics/: each topic's kind, produce rate and size; ``sort=size``."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.sampler import take_sample
from storeadapter.engine import clock

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled(store, monkeypatch):
    monkeypatch.setattr(clock, "now_ms", lambda: 1_800_000_000_000)
    current._cache.update(token=None, groups=None)
    for name, count in (("a", 1), ("b", 5), ("c", 3)):
        store.create_topic(name, 1)
        store.append_batch(name, [{"body": b"x" * 100} for _ in range(count)])
    assert take_sample().written
    return store


def test_the_list_gives_each_topics_size_kind_and_rate(sampled, as_viewer):
    results = as_viewer.get("/api/v1/topics/").json()["results"]

    by_name = {row["name"]: row for row in results}
    one = by_name["a"]["size_bytes"]
    assert one > 100
    assert by_name["b"]["size_bytes"] == 5 * one
    assert by_name["c"]["size_state"] == "known"
    assert by_name["c"]["kind"] == "plain"
    assert by_name["c"]["produce_rate"] is None  # one sample: no rate yet


def test_the_list_sorts_by_size(sampled, as_viewer):
    results = as_viewer.get("/api/v1/topics/", {"sort": "size"}).json()["results"]

    assert [row["name"] for row in results] == ["b", "c", "a"]
