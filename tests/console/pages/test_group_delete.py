"""Deleting a group (copying another group's offsets is a reset: test_offset_reset_pages)."""

import pytest

from console.audit.models import AuditEntry

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def groups(store):
    store.create_topic("t", queues=2)
    store.append_batch("t", [{"body": f"m{i}", "queue": i % 2} for i in range(10)])
    store.commit_offset("source", "t", 0, 3)
    store.commit_offset("source", "t", 1, 4)
    store.commit_offset("target", "t", 0, 1)
    return store


def test_an_admin_deletes_a_group_after_typing_its_name(as_admin, groups):
    response = as_admin.post("/groups/target/delete/", {"confirm": "target"})

    assert response.status_code == 302
    assert "target" not in groups.groups()
    assert AuditEntry.objects.filter(action="group.delete").count() == 1


def test_a_wrong_confirmation_keeps_the_group(as_admin, groups):
    as_admin.post("/groups/target/delete/", {"confirm": "targe"})

    assert "target" in groups.groups()


def test_an_operator_cannot_delete_a_group(as_operator, groups):
    assert as_operator.post("/groups/target/delete/", {"confirm": "target"}).status_code == 403
    assert "target" in groups.groups()


def test_viewers_see_neither_form(as_viewer, groups):
    body = as_viewer.get("/groups/target/").content.decode()

    assert "Reset offsets" not in body and "Delete group" not in body
