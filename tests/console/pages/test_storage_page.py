"""/storage/: segments, disk use, settings, last recovery and retention."""

import pytest

from storeadapter.engine import fileio

pytestmark = pytest.mark.django_db


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get("/storage/")

    assert response.status_code == 302
    assert "next=/storage/" in response["Location"]


def test_a_user_without_a_role_is_refused(as_nobody, store):
    assert as_nobody.get("/storage/").status_code == 403


def test_a_viewer_sees_segments_settings_and_the_last_recovery(as_viewer, store):
    store.create_topic("t", queues=1)
    store.append("t", b"x")

    response = as_viewer.get("/storage/")

    assert response.status_code == 200
    body = response.content.decode()
    assert "00000000000000000000" in body
    assert "72" in body and "hours" in body
    assert "Last recovery" in body
    assert "Retention has not run on this store yet." in body


def test_the_last_retention_report_is_shown(as_viewer, store):
    store.create_topic("t", queues=1)
    store.delete_expired()

    body = as_viewer.get("/storage/").content.decode()

    assert "Segments deleted" in body


def test_disk_use_is_shown_as_measured_now(as_viewer, store, monkeypatch):
    store.flush()
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (60, 100))  # since the last flush

    body = as_viewer.get("/storage/").content.decode()

    assert "<strong>60.0%</strong> full" in body


def test_every_page_and_check_gives_the_disk_use_retention_acts_on(
    as_viewer, client, store, monkeypatch
):
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (709, 1000))

    storage = as_viewer.get("/storage/").content.decode()
    dashboard = as_viewer.get("/").content.decode()
    api = as_viewer.get("/api/v1/storage/").json()
    ready = client.get("/readyz").json()

    assert "<strong>70.9%</strong> full" in storage
    assert "70.9% of the disk holding the store" in dashboard
    assert api["disk_ratio"] == 0.709
    assert "disk 71% full" in ready["checks"]["store"]["detail"]


def test_the_page_changes_nothing_on_post(as_admin, store):
    assert as_admin.post("/storage/").status_code == 405


def test_the_storage_page_reads_the_stores_stats_once(as_viewer, store, monkeypatch):
    store.create_topic("t", queues=1)
    calls = []
    stats = type(store).stats

    def counted(self, **kwargs):
        calls.append(kwargs)
        return stats(self, **kwargs)

    monkeypatch.setattr(type(store), "stats", counted)

    assert as_viewer.get("/storage/").status_code == 200
    assert calls == [{"topics": False}]
