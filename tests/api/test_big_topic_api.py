"""The API on a big topic (TIDEMARK_BIG_TOPIC_QUEUES lowered so that a shared topic of
20,000 queues is one): queues are paged, totals come from the sampler and say when, a group's
big-topic queues come a page at a time; topics of more than 1024 queues can be created (as
shared ones), up to the engine's limit."""

from __future__ import annotations

import pytest

from console.monitoring.sampler import take_sample
from storeadapter.engine.admin import MAX_SHARED_QUEUES
from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

QUEUES = 20_000


@pytest.fixture
def wide(settings, store):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 1_000
    settings.TIDEMARK_SAMPLE_CHUNK_QUEUES = 5_000
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = QUEUES
    store.create_topic("wide", queues=QUEUES, layout="shared")
    store.append_batch("wide", [{"body": b"m", "queue": q} for q in range(0, QUEUES, 50)])
    store.commit_offsets("billing", "wide", {q: 1 for q in range(0, 1_000, 50)})
    return store


def test_queues_are_paged(as_viewer, wide):
    body = as_viewer.get("/api/v1/topics/wide/queues/", {"page": 3, "page_size": 50}).json()

    assert body["count"] == QUEUES
    assert [q["queue"] for q in body["results"]] == list(range(100, 150))
    assert body["results"][0]["messages"] == 1
    assert "page=4" in body["next"]


def test_one_queue_of_a_big_topic(as_viewer, wide):
    body = as_viewer.get(f"/api/v1/topics/wide/queues/{QUEUES - 50}/").json()

    assert (body["queue"], body["max_offset"]) == (QUEUES - 50, 1)
    response = as_viewer.get(f"/api/v1/topics/wide/queues/{QUEUES}/")
    assert response.status_code == 404


def test_a_big_topics_totals_come_from_the_sample(as_viewer, wide):
    before = as_viewer.get("/api/v1/topics/wide/").json()
    assert (before["sampled_ms"], before["messages"], before["layout"]) == (0, 0, "shared")

    report = take_sample()
    wide.append_batch("wide", [{"body": b"late", "queue": 1}])
    body = as_viewer.get("/api/v1/topics/wide/").json()

    assert body["sampled_ms"] == report.ts_ms
    assert body["messages"] == QUEUES // 50  # as sampled, without the late one
    assert body["sampled_queues"] == QUEUES
    assert len(body["queue_list"]) == 1024
    listed = as_viewer.get("/api/v1/topics/", {"q": "wide"}).json()["results"]
    assert (listed[0]["messages"], listed[0]["sampled_ms"]) == (QUEUES // 50, report.ts_ms)


def test_a_small_topics_totals_are_live(as_viewer, store):
    store.create_topic("orders", 2)
    store.append("orders", b"x", queue=0)

    body = as_viewer.get("/api/v1/topics/orders/").json()

    assert (body["messages"], body["sampled_ms"], body["layout"]) == (1, None, "files")


def test_a_groups_big_topic_is_sampled_and_its_queues_paged(as_viewer, wide):
    take_sample()

    body = as_viewer.get("/api/v1/groups/billing/", {"topic": "wide", "queue_page": 2}).json()

    [big] = body["big_topics"]
    assert big["lag"] == QUEUES // 50 - 20
    assert (big["queues"], big["queue_page"], big["queue_pages"]) == (QUEUES, 2, QUEUES // 200)
    assert [q["queue"] for q in body["queues"]] == list(range(200, 400))
    assert body["lag"] == QUEUES // 50 - 20
    listed = as_viewer.get("/api/v1/groups/").json()["results"]
    assert listed[0]["lag"] == QUEUES // 50 - 20


def test_create_a_topic_of_more_than_1024_queues_makes_it_shared(as_admin, store):
    response = as_admin.post("/api/v1/topics/", {"name": "many", "queues": 5_000}, format="json")

    assert response.status_code == 201
    assert (response.json()["queues"], response.json()["layout"]) == (5_000, "shared")
    assert store.topic("many").layout == "shared"


def test_create_beyond_the_engines_limit_is_a_400(as_admin, store):
    response = as_admin.post(
        "/api/v1/topics/", {"name": "huge", "queues": MAX_SHARED_QUEUES + 1}, format="json"
    )

    assert response.status_code == 400
    assert "queues" in str(error_of(response))
    assert store.topics() == []
