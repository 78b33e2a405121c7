"""/topics/selected/delete/: deleting the topics selected on the topic list, after a confirmation
page where the admin types how many topics, or their names; each deletion audited, each
topic checked against the user's roles (a request naming one they may not manage deletes
none)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

URL = "/topics/selected/delete/"


@pytest.fixture
def topics(store):
    for name in ("team-a.orders", "team-a.bills", "team-b.users"):
        store.create_topic(name, 1)
    store.append("team-a.orders", b"m", queue=0)
    return store


def names(store) -> set[str]:
    return {info.name for info in store.topics()}


def test_the_list_offers_a_checkbox_per_topic_to_an_admin(as_admin, topics):
    response = as_admin.get("/topics/")

    assert response.content.count(b'name="topics"') == 3
    assert b"Delete selected" in response.content


def test_the_list_offers_no_checkbox_to_an_operator(as_operator, topics):
    response = as_operator.get("/topics/")

    assert b'name="topics"' not in response.content


def test_selecting_asks_for_a_typed_confirmation_first(as_admin, topics):
    response = as_admin.post(URL, {"topics": ["team-a.orders", "team-a.bills"]})

    assert response.status_code == 200
    assert b"Type 2" in response.content
    assert names(topics) == {"team-a.orders", "team-a.bills", "team-b.users"}


def test_typing_the_number_deletes_each_topic_and_audits_each(as_admin, topics):
    response = as_admin.post(
        URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "2"}, follow=True
    )

    assert names(topics) == {"team-b.users"}
    assert b"Deleted 2 topics" in response.content
    rows = AuditEntry.objects.filter(action="topic.delete").order_by("target")
    assert [row.target for row in rows] == ["topic team-a.bills", "topic team-a.orders"]
    assert rows.get(target="topic team-a.orders").before["messages"] == 1


def test_typing_the_names_deletes_them_too(as_admin, topics):
    as_admin.post(
        URL,
        {"topics": ["team-a.orders", "team-a.bills"], "confirm": "team-a.bills, team-a.orders"},
    )

    assert names(topics) == {"team-b.users"}


def test_a_wrong_confirmation_deletes_nothing_and_says_what_to_type(as_admin, topics):
    response = as_admin.post(URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "3"})

    assert response.status_code == 200
    assert "Type 2" in response.content.decode()
    assert "That is not" in response.content.decode()
    assert len(names(topics)) == 3
    assert not AuditEntry.objects.filter(action="topic.delete").exists()


def test_nothing_selected_is_said_and_nothing_changes(as_admin, topics):
    response = as_admin.post(URL, {}, follow=True)

    assert "Select at least one topic" in response.content.decode()
    assert len(names(topics)) == 3


def test_an_unknown_topic_is_named_and_nothing_is_deleted(as_admin, topics):
    response = as_admin.post(
        URL, {"topics": ["team-a.orders", "nope"], "confirm": "2"}, follow=True
    )

    assert "nope" in response.content.decode()
    assert len(names(topics)) == 3


@pytest.fixture
def team_a_admin(django_user_model) -> Client:
    role = Group.objects.create(name="team-a-admins")
    RoleRule.objects.create(
        role=role, kind="topic", pattern="team-a.*", actions=["view", "read", "manage"]
    )
    RoleRule.objects.create(role=role, kind="topic", pattern="team-b.*", actions=["view"])
    user = django_user_model.objects.create_user(username="ann", password=None)
    user.groups.add(role)
    client = Client()
    client.force_login(user)
    return client


def test_a_scoped_role_gets_checkboxes_only_on_what_it_may_delete(team_a_admin, topics):
    response = team_a_admin.get("/topics/")

    assert response.content.count(b'name="topics"') == 2
    assert b'value="team-b.users"' not in response.content


def test_a_scoped_role_naming_a_topic_it_may_not_delete_is_refused_whole(team_a_admin, topics):
    response = team_a_admin.post(URL, {"topics": ["team-a.orders", "team-b.users"], "confirm": "2"})

    assert response.status_code == 403
    assert "team-b.users" in response.content.decode()
    assert "team-a.orders" not in response.context["reason"]
    assert len(names(topics)) == 3


def test_a_scoped_role_deletes_its_own_topics(team_a_admin, topics):
    team_a_admin.post(URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "2"})

    assert names(topics) == {"team-b.users"}


def test_a_get_goes_back_to_the_list(as_admin, topics):
    response = as_admin.get(URL)

    assert response.status_code == 303
    assert response["Location"] == "/topics/"


@pytest.mark.parametrize("name", ["delete", "selected"])
def test_a_topic_named_like_the_bulk_page_keeps_its_own_page(as_admin, store, name):
    store.create_topic(name, 1)

    response = as_admin.get(f"/topics/{name}/")

    assert response.status_code == 200
    assert response.context["topic"].name == name
