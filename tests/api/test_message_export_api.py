"""/api/v1/messages/export/: any search's result set (by key, by time, a queue range) as
JSON Lines, bounded by max_records and max_seconds; the last line says how far it got and
the URL that continues it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth.models import Group

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry
from storeadapter.engine import Message, clock
from tests.api.apitools import error_of

pytestmark = [pytest.mark.django_db]

EXPORT = "/api/v1/messages/export/"
T0 = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def now(monkeypatch):
    current = {"ms": T0}
    monkeypatch.setattr(clock, "now_ms", lambda: current["ms"])
    return current


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def split(response) -> tuple[list[dict], dict]:
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    return lines[:-1], lines[-1]["export"]


def every_line(client, query: dict) -> tuple[list[dict], int]:
    found, requests = [], 0
    response = client.get(EXPORT, query)
    while True:
        requests += 1
        messages, trailer = split(response)
        found += messages
        if trailer["complete"]:
            return found, requests
        url = urlsplit(trailer["continue"])
        assert url.path == EXPORT
        response = client.get(EXPORT, dict(parse_qsl(url.query)))


def test_a_key_export_continues_through_its_trailer(as_viewer, orders, now):
    sent = []
    for i in range(5):
        now["ms"] = T0 + i // 2
        sent.append(orders.append("orders", f"v{i}", key="k").message_id)

    first, trailer = split(as_viewer.get(EXPORT, {"topic": "orders", "key": "k", "max_records": 3}))
    assert trailer["next"] == {"until": T0 + 1, "skip": 2}
    every, requests = every_line(as_viewer, {"topic": "orders", "key": "k", "max_records": 3})

    assert [m["message_id"] for m in every] == sent[::-1]
    assert requests == 2


def test_a_time_export_reads_since_to_until_oldest_first(as_viewer, orders, now):
    sent = []
    for i in range(6):
        now["ms"] = T0 + i
        sent.append(orders.append("orders", f"t{i}", queue=i % 2).message_id)

    query = {"topic": "orders", "since": T0 + 1, "until": T0 + 4, "max_records": 2}
    every, requests = every_line(as_viewer, query)

    assert [m["message_id"] for m in every] == sent[1:5]
    assert requests == 2


def test_a_range_export_continues_from_the_next_offset(as_viewer, orders):
    orders.append_batch("orders", [Message(f"m{i}", queue=1) for i in range(5)])

    messages, trailer = split(
        as_viewer.get(EXPORT, {"topic": "orders", "queue": 1, "max_records": 4})
    )

    assert [m["queue_offset"] for m in messages] == [0, 1, 2, 3]
    assert trailer["next"] == {"from_offset": 4}
    assert trailer["stopped_by"] == "records"


def test_a_time_export_over_too_many_queues_is_refused(as_viewer, orders, settings):
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 1

    response = as_viewer.get(EXPORT, {"topic": "orders", "since": T0})

    assert response.status_code == 400
    assert error_of(response)["code"] == "search_too_wide"


@pytest.mark.parametrize(
    "query",
    [
        {"topic": "orders", "key": "k", "max_records": 0},
        {"topic": "orders", "key": "k", "max_records": 100_001},
        {"topic": "orders", "key": "k", "max_seconds": 301},
        {"topic": "orders", "key": "k", "skip": -1},
        {"topic": "orders", "key": "k", "queue": 0},
    ],
    ids=["no-records", "too-many-records", "too-long", "negative-skip", "two-searches"],
)
def test_a_bad_export_is_a_400(as_viewer, orders, query):
    response = as_viewer.get(EXPORT, query)

    assert response.status_code == 400


def test_a_scoped_role_exports_only_topics_it_may_read(orders, django_user_model):
    from rest_framework.test import APIClient

    role = Group.objects.create(name="team-a")
    RoleRule.objects.create(role=role, kind="topic", pattern="team-a.*", actions=["view", "read"])
    user = django_user_model.objects.create_user(username="ann", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)

    response = client.get(EXPORT, {"topic": "orders", "key": "k"})

    assert response.status_code == 403


def test_an_api_export_is_an_audited_read(as_viewer, orders, settings):
    settings.TIDEMARK_AUDIT_READS = True
    orders.append("orders", "v", key="k")

    split(as_viewer.get(EXPORT, {"topic": "orders", "key": "k"}))

    row = AuditEntry.objects.get(action="read.export")
    assert row.target == "topic orders" and "key=k" in row.detail
    assert row.after == {"count": 1}
