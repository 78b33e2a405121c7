"""Deleting a group deletes its DLQ topic too (issue 32, case 7): its dead letters no
longer answer, and the audit entry says the DLQ went with it."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from tests.worlds import DLQ, billing_before_dead_letters, dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def billing(store):
    billing_before_dead_letters(store).create_topic(DLQ, 1)
    dead_letter(store, 0)
    return store


def test_deleting_a_group_deletes_its_dlq(as_admin, billing):
    assert as_admin.get("/api/v1/groups/billing/dlq/").status_code == 200

    assert as_admin.delete("/api/v1/groups/billing/").status_code == 204

    assert as_admin.get("/api/v1/groups/billing/dlq/").status_code == 404
    assert DLQ not in [info.name for info in billing.topics()]
    entry = AuditEntry.objects.get(action="group.delete")
    assert entry.before["dlq_deleted"] is True
