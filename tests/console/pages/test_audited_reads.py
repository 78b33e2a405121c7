"""Audited reads (issue 32, item 11): with TIDEMARK_AUDIT_READS on, message reads,
searches, pulls and API produces are audit rows (who, what, how many), kept bounded and
purgeable; off (the default), none is written."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from console.audit import reads
from console.audit.log import record
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(store):
    store.create_topic("orders", 1)
    return [store.append("orders", f"m{i}".encode(), queue=0) for i in range(3)]


@pytest.fixture
def audited(settings):
    settings.TIDEMARK_AUDIT_READS = True
    return settings


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def read_rows():
    return list(
        AuditEntry.objects.filter(action__startswith="read.")
        .order_by("pk")
        .values("username", "action", "target", "after")
    )


def test_reads_are_not_audited_by_default(orders, as_viewer):
    as_viewer.get(f"/messages/{orders[0].message_id}/")

    assert read_rows() == []


def test_a_message_page_read_is_audited_with_who_and_what(audited, orders, as_viewer):
    as_viewer.get(f"/messages/{orders[0].message_id}/")

    assert read_rows() == [
        {
            "username": "vera",
            "action": "read.message",
            "target": f"message {orders[0].message_id}",
            "after": {"count": 1},
        }
    ]


def test_an_api_search_is_audited_with_how_many_messages(audited, orders, viewer):
    assert api(viewer).get("/api/v1/messages/", {"topic": "orders", "queue": 0}).status_code == 200

    assert read_rows() == [
        {
            "username": "vera",
            "action": "read.search",
            "target": "topic orders",
            "after": {"count": 3},
        }
    ]


def test_a_pull_is_audited(audited, orders, viewer):
    api(viewer).get("/api/v1/topics/orders/queues/0/messages/", {"group": "g", "max": 2})

    assert [(r["action"], r["after"]) for r in read_rows()] == [("read.pull", {"count": 2})]


def test_a_produce_through_the_api_is_audited(audited, orders, operator):
    api(operator).post("/api/v1/topics/orders/messages/", {"body": "x"}, format="json")

    row = AuditEntry.objects.get(action="write.produce")
    assert (row.username, row.target, row.after) == ("otto", "topic orders", {"count": 1})


def test_a_refused_read_is_not_audited_as_a_read(audited, orders, as_nobody):
    as_nobody.get(f"/messages/{orders[0].message_id}/")

    assert read_rows() == []


def test_read_rows_older_than_the_kept_days_are_purged(audited, viewer):
    audited.TIDEMARK_AUDIT_READS_KEEP_DAYS = 7
    old = record(viewer, "read.search", "topic orders")
    AuditEntry.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    record(viewer, "read.search", "topic orders")
    record(viewer, "topic.create", "topic orders")
    AuditEntry.objects.filter(action="topic.create").update(
        created_at=timezone.now() - timedelta(days=80)
    )

    assert reads.purge() == 1
    assert AuditEntry.objects.count() == 2  # the new read and the (old) change stay


def test_read_rows_beyond_the_most_kept_are_purged_oldest_first(audited, viewer):
    audited.TIDEMARK_AUDIT_READS_MAX_ROWS = 2
    made = [record(viewer, "read.message", f"message {i}").pk for i in range(5)]

    reads.purge()

    assert sorted(AuditEntry.objects.values_list("pk", flat=True)) == made[-2:]


def test_the_purge_command_deletes_every_read_row_with_all(viewer):
    record(viewer, "read.message", "message 1")
    record(viewer, "write.produce", "topic orders")
    record(viewer, "topic.create", "topic orders")
    out = StringIO()

    call_command("purge_read_audit", "--all", stdout=out)

    assert "deleted 2 read row(s)" in out.getvalue()
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["topic.create"]
