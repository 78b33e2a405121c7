from datetime import UTC, datetime

import pytest
from django.conf import settings

from console.audit.log import record
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def entry_at(when: datetime, action: str = "topic.create", username: str = "ada", target="t"):
    """An audit row with a chosen time (record() always stamps now)."""
    return AuditEntry.objects.create(
        created_at=when, username=username, action=action, target=target
    )


def listed_ids(response) -> list[int]:
    return [entry.pk for entry in response.context["page"]]


# record()


def test_record_writes_a_row_with_before_and_after_json(operator):
    entry = record(
        operator,
        "queue.freeze",
        "topic orders queue 3",
        before={"writable": True},
        after={"writable": False},
        detail="maintenance",
        link="/topics/orders/",
    )

    saved = AuditEntry.objects.get(pk=entry.pk)
    assert (saved.user, saved.username) == (operator, "otto")
    assert (saved.action, saved.target) == ("queue.freeze", "topic orders queue 3")
    assert (saved.before, saved.after) == ({"writable": True}, {"writable": False})
    assert (saved.detail, saved.link) == ("maintenance", "/topics/orders/")
    assert saved.created_at is not None


def test_record_keeps_username_when_the_user_is_deleted(operator):
    entry = record(operator, "topic.delete", "topic orders")

    operator.delete()

    entry.refresh_from_db()
    assert entry.user is None
    assert entry.username == "otto"


def test_record_without_user_is_a_system_row():
    entry = record(None, "retention.run", "store")

    assert (entry.user, entry.username) == (None, "")


def test_record_stores_datetimes_in_json_as_text(admin):
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

    entry = record(admin, "offset.reset", "group g", before={"at": when})

    entry.refresh_from_db()
    assert entry.before == {"at": "2024-05-01T12:00:00Z"}


def test_record_requires_an_action(admin):
    with pytest.raises(ValueError, match="action is required"):
        record(admin, " ", "topic orders")


def test_record_refuses_a_link_that_is_not_a_path_or_http(admin):
    with pytest.raises(ValueError, match="link"):
        record(admin, "topic.create", "topic orders", link="javascript:alert(1)")


def test_changes_lists_only_changed_fields():
    entry = AuditEntry(before={"queues": 4, "name": "o"}, after={"queues": 8, "name": "o"})

    assert entry.changes() == [{"field": "queues", "before": "4", "after": "8"}]


def test_changes_of_a_creation_shows_the_new_value():
    entry = AuditEntry(before=None, after={"queues": 8})

    assert entry.changes() == [{"field": "", "before": "", "after": '{"queues": 8}'}]


# /audit/ access


def test_anonymous_is_redirected_to_login_with_next(client):
    response = client.get("/audit/?action=topic.")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/audit/%3Faction%3Dtopic."


def test_user_without_role_gets_403(as_nobody):
    response = as_nobody.get("/audit/")

    assert response.status_code == 403
    assert b"viewer" in response.content


def test_viewer_sees_the_audit_log(as_viewer, operator):
    record(operator, "topic.create", "topic orders", after={"queues": 8})

    response = as_viewer.get("/audit/")

    assert response.status_code == 200
    assert "audit/list.html" in [t.name for t in response.templates]
    assert b"topic orders" in response.content
    assert b"otto" in response.content


def test_audit_page_refuses_post(as_admin):
    assert as_admin.post("/audit/").status_code == 405


def test_entries_are_listed_newest_first(as_viewer):
    old = entry_at(datetime(2024, 1, 1, tzinfo=UTC))
    new = entry_at(datetime(2024, 3, 1, tzinfo=UTC))
    middle = entry_at(datetime(2024, 2, 1, tzinfo=UTC))

    response = as_viewer.get("/audit/")

    assert listed_ids(response) == [new.pk, middle.pk, old.pk]


def test_link_is_shown(as_viewer, operator):
    record(operator, "offset.reset", "group g", link="/groups/g/resets/7/")

    response = as_viewer.get("/audit/")

    assert b'href="/groups/g/resets/7/"' in response.content


# /audit/ filters


def test_filter_by_action_prefix(as_viewer):
    day = datetime(2024, 1, 1, tzinfo=UTC)
    create = entry_at(day, action="topic.create")
    delete = entry_at(day, action="topic.delete")
    entry_at(day, action="topics.other")
    entry_at(day, action="offset.reset")

    response = as_viewer.get("/audit/", {"action": "topic."})

    assert sorted(listed_ids(response)) == sorted([create.pk, delete.pk])


def test_filter_by_exact_action(as_viewer):
    day = datetime(2024, 1, 1, tzinfo=UTC)
    create = entry_at(day, action="topic.create")
    entry_at(day, action="topic.create_many")

    response = as_viewer.get("/audit/", {"action": "topic.create"})

    assert listed_ids(response) == [create.pk]


def test_filter_by_user(as_viewer):
    day = datetime(2024, 1, 1, tzinfo=UTC)
    mine = entry_at(day, username="otto")
    entry_at(day, username="ada")

    response = as_viewer.get("/audit/", {"user": "Otto"})

    assert listed_ids(response) == [mine.pk]


def test_filter_by_target_contains(as_viewer):
    day = datetime(2024, 1, 1, tzinfo=UTC)
    orders = entry_at(day, target="topic Orders-EU")
    entry_at(day, target="topic payments")

    response = as_viewer.get("/audit/", {"target": "orders"})

    assert listed_ids(response) == [orders.pk]


def test_filter_by_date_range_includes_the_whole_last_day(as_viewer):
    entry_at(datetime(2024, 1, 31, 23, 59, tzinfo=UTC))
    first = entry_at(datetime(2024, 2, 1, 0, 0, tzinfo=UTC))
    last = entry_at(datetime(2024, 2, 2, 23, 59, 59, tzinfo=UTC))
    entry_at(datetime(2024, 2, 3, 0, 0, tzinfo=UTC))

    response = as_viewer.get("/audit/", {"date_from": "2024-02-01", "date_to": "2024-02-02"})

    assert listed_ids(response) == [last.pk, first.pk]


def test_bad_date_shows_a_form_error_not_a_500(as_viewer):
    entry_at(datetime(2024, 1, 1, tzinfo=UTC))

    response = as_viewer.get("/audit/", {"date_from": "2024-13-45"})

    assert response.status_code == 200
    assert "date_from" in response.context["form"].errors
    assert listed_ids(response) == []
    assert b"Enter a valid date." in response.content


def test_end_date_before_start_date_is_a_form_error(as_viewer):
    response = as_viewer.get("/audit/", {"date_from": "2024-02-02", "date_to": "2024-02-01"})

    assert response.status_code == 200
    assert "date_to" in response.context["form"].errors


# /audit/ pagination


def test_pages_hold_fifty_entries(as_viewer):
    for minute in range(51):
        entry_at(datetime(2024, 1, 1, 0, minute, tzinfo=UTC))

    first = as_viewer.get("/audit/")
    second = as_viewer.get("/audit/", {"page": 2})

    assert len(listed_ids(first)) == 50
    assert len(listed_ids(second)) == 1
    assert listed_ids(second)[0] not in listed_ids(first)


def test_page_links_keep_the_filters(as_viewer):
    for minute in range(51):
        entry_at(datetime(2024, 1, 1, 0, minute, tzinfo=UTC), action="topic.create")

    response = as_viewer.get("/audit/", {"action": "topic."})

    assert b'href="?action=topic.&amp;page=2"' in response.content


def test_page_number_out_of_range_shows_the_last_page(as_viewer):
    only = entry_at(datetime(2024, 1, 1, tzinfo=UTC))

    response = as_viewer.get("/audit/", {"page": "99"})

    assert response.status_code == 200
    assert listed_ids(response) == [only.pk]


# Django admin


def test_admin_site_lists_entries_read_only(admin_client):
    entry = entry_at(datetime(2024, 1, 1, tzinfo=UTC))

    assert admin_client.get("/admin/audit/auditentry/").status_code == 200
    assert admin_client.get("/admin/audit/auditentry/add/").status_code == 403
    change = admin_client.post(f"/admin/audit/auditentry/{entry.pk}/change/", {"action": "x"})
    assert change.status_code == 403
    entry.refresh_from_db()
    assert entry.action == "topic.create"


def test_times_are_shown_in_utc_with_the_zone_named(as_viewer, admin):
    entry = record(admin, "topic.create", "topic orders")

    body = as_viewer.get("/audit/").content.decode()

    assert entry.created_at.strftime("%Y-%m-%d %H:%M:%S UTC") in body
