"""Offset commits made through the API are audited (issue 30, access 2): who moved which
group's offset on which queue, from what to what."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine import Message

pytestmark = pytest.mark.django_db

COMMIT = "/api/v1/topics/orders/queues/0/commit/"


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    store.append_batch("orders", [Message(f"m{i}", queue=0) for i in range(5)])
    return store


def test_an_api_commit_is_audited_with_the_offset_before_and_after(as_operator, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    response = as_operator.post(COMMIT, {"group": "billing", "offset": 3}, format="json")

    assert response.status_code == 200
    entry = AuditEntry.objects.get(action="offset.commit")
    assert entry.username == as_operator.user.username
    assert entry.target == "group billing on orders queue 0"
    assert (entry.before, entry.after) == ({"offset": 1}, {"offset": 3})


def test_a_refused_api_commit_writes_no_audit_row(as_operator, orders):
    response = as_operator.post(COMMIT, {"group": "billing", "offset": 99}, format="json")

    assert response.status_code == 400
    assert not AuditEntry.objects.filter(action="offset.commit").exists()
