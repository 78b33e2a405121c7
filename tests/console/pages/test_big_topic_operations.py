"""Changes to a big topic and its groups, audited without reading every queue: the
message count of a deleted topic and the lag of a deleted group come from the latest
sample (TIDEMARK_BIG_TOPIC_QUEUES is lowered here so that 20,000 queues are big)."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from console.monitoring.sampler import take_sample
from console.operations import topics as topic_operations
from tests.console.bigtopic import QUEUES, make_wide

pytestmark = pytest.mark.django_db


@pytest.fixture
def wide(settings, store, monkeypatch):
    make_wide(settings, store)

    def read_every_queue(*args, **kwargs):
        raise AssertionError("a big topic's queues were all read")

    monkeypatch.setattr(topic_operations, "queue_rows", read_every_queue)
    return store


def test_a_deleted_big_topic_is_audited_with_its_sampled_message_count(as_admin, wide):
    assert take_sample().written

    response = as_admin.post("/topics/wide/", {"action": "delete", "confirm": "wide"})

    assert response.status_code == 302
    assert wide.topics() == []
    before = AuditEntry.objects.get(action="topic.delete").before
    assert before["messages"] == QUEUES // 50
    assert before["messages_sampled_ms"] > 0


def test_a_big_topic_deleted_before_any_sample_is_audited_without_a_count(as_admin, wide):
    as_admin.post("/topics/wide/", {"action": "delete", "confirm": "wide"})

    before = AuditEntry.objects.get(action="topic.delete").before
    assert before == {
        "name": "wide",
        "queues": QUEUES,
        "messages": None,
        "messages_sampled_ms": None,
    }


def test_a_deleted_group_on_a_big_topic_is_audited_with_its_sampled_lag(as_admin, wide):
    assert take_sample().written

    as_admin.post("/groups/billing/delete/", {"confirm": "billing"})

    before = AuditEntry.objects.get(action="group.delete").before
    assert before == {"topics": ["wide"], "lag": QUEUES // 50 - 20, "dlq_deleted": False}
