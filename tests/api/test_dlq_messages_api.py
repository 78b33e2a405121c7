"""/api/v1/groups/<group>/dlq/ counts messages, not copies, like the DLQ page (issue 30,
dead letters 4); redrive all sends each message's latest copy not yet redriven; DELETE
purges with the group's name as confirmation, audited."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine import TopicNotFoundError
from tests.worlds import DLQ, dies, orders_bodies, poison_world

pytestmark = pytest.mark.django_db

DLQ_URL = "/api/v1/groups/billing/dlq/"
REDRIVE = "/api/v1/groups/billing/dlq/redrive/"


@pytest.fixture
def poison(store):
    return poison_world(store)


def test_the_list_counts_messages_and_marks_redriven_copies(as_operator, store, poison):
    as_operator.post(REDRIVE, {"message_ids": [poison[0]]}, format="json")
    second = dies(store, 4)

    body = as_operator.get(DLQ_URL).json()

    assert body["count"] == 3
    [first] = [m for m in body["results"] if m["original"]["queue_offset"] == 1]
    assert first["message_id"] == second  # the latest copy
    assert [c["message_id"] for c in first["copies"]] == [poison[0], second]
    redriven = first["copies"][0]["redriven"]
    assert (redriven["by"], redriven["topic"], redriven["queue_offset"]) == ("otto", "orders", 4)
    assert first["copies"][1]["redriven"] is None


def test_redrive_all_sends_only_what_was_not_redriven(as_operator, store, poison):
    as_operator.post(REDRIVE, {"message_ids": [poison[0]]}, format="json")

    response = as_operator.post(REDRIVE, {"all": True}, format="json")

    assert response.json()["sent"] == 2
    assert orders_bodies(store)[5:] == [b"poison-1", b"poison-2"]


def test_purge_needs_the_groups_name(as_operator, store, poison):
    response = as_operator.delete(DLQ_URL, {"confirm": "orders"}, format="json")

    assert response.status_code == 400
    assert store.topic(DLQ).name == DLQ


def test_purge_deletes_the_dlq_and_is_audited(as_operator, store, poison):
    response = as_operator.delete(DLQ_URL, {"confirm": "billing"}, format="json")

    assert response.status_code == 200
    assert response.json() == {"messages": 3, "copies": 3}
    with pytest.raises(TopicNotFoundError):
        store.topic(DLQ)
    assert AuditEntry.objects.get(action="dlq.purge").before == {"messages": 3, "copies": 3}


def test_a_viewer_cannot_purge(as_viewer, store, poison):
    assert as_viewer.delete(DLQ_URL, {"confirm": "billing"}, format="json").status_code == 403
    assert store.topic(DLQ).name == DLQ
