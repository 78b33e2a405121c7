"""Copying offsets from another group, and deleting a group."""

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


def test_an_operator_copies_offsets_from_another_group(as_operator, groups):
    response = as_operator.post("/groups/target/copy/", {"source": "source"})

    assert response.status_code == 302
    assert [groups.committed_offset("target", "t", q) for q in (0, 1)] == [3, 4]
    assert AuditEntry.objects.filter(action="group.copy").count() == 1


def test_copying_from_an_unknown_group_changes_nothing(as_operator, groups):
    as_operator.post("/groups/target/copy/", {"source": "nope"})

    assert groups.committed_offset("target", "t", 0) == 1
    assert not AuditEntry.objects.filter(action="group.copy").exists()


def test_a_viewer_cannot_copy(as_viewer, groups):
    assert as_viewer.post("/groups/target/copy/", {"source": "source"}).status_code == 403
    assert groups.committed_offset("target", "t", 0) == 1


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

    assert "Copy offsets" not in body and "Delete group" not in body
