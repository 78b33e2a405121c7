"""/api/v1/storage/ and /api/v1/audit/: read-only, viewer and up."""

from __future__ import annotations

import pytest

from console.audit.log import record
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.mark.parametrize("who", CLIENTS)
@pytest.mark.parametrize("url", ["/api/v1/storage/", "/api/v1/audit/"])
def test_reading_needs_viewer(clients, store, who, url):
    assert clients[who].get(url).status_code == expected_status(who, "viewer", 200)


@pytest.mark.parametrize("url", ["/api/v1/storage/", "/api/v1/audit/"])
def test_they_are_read_only(as_admin, store, url):
    response = as_admin.post(url, {}, format="json")

    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


def test_storage_shows_segments_disk_and_thresholds(as_viewer, store):
    store.create_topic("t", 1)
    store.append("t", b"x" * 100)

    body = as_viewer.get("/api/v1/storage/").json()

    assert body["flush_mode"] == "async"
    assert body["segment_count"] == len(body["segments"]) == 1
    assert body["segments"][0]["used_bytes"] > 100
    assert body["disk_thresholds"] == {"warn_ratio": 1.0, "force_ratio": 1.0, "reject_ratio": 1.0}
    assert body["last_recovery"] is not None
    assert body["failed"] is None


def test_audit_lists_newest_first_with_filters(as_viewer, store):
    viewer = as_viewer.user
    record(viewer, "topic.create", "topic a")
    record(viewer, "queue.freeze", "topic a queue 0")
    record(None, "topic.delete", "topic b")

    everything = as_viewer.get("/api/v1/audit/").json()
    topics = as_viewer.get("/api/v1/audit/?action=topic.").json()
    by_user = as_viewer.get("/api/v1/audit/?user=VERA&target=queue").json()

    assert [e["action"] for e in everything["results"]] == [
        "topic.delete",
        "queue.freeze",
        "topic.create",
    ]
    assert [e["target"] for e in topics["results"]] == ["topic b", "topic a"]
    assert [e["action"] for e in by_user["results"]] == ["queue.freeze"]


@pytest.mark.parametrize(
    "query", ["date_from=yesterday", "date_from=2026-05-02&date_to=2026-05-01", "colour=red"]
)
def test_bad_audit_filters_are_400(as_viewer, store, query):
    response = as_viewer.get(f"/api/v1/audit/?{query}")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
