"""POST /api/v1/selected/topics/delete/ (issue 34, item 5): delete several topics at once,
after the typed confirmation the page asks for (how many, or their names); the rule is
the page's (console.topics.bulk): every topic checked against the user's roles (one they
may not manage refuses the request whole), each deletion audited on its own, and the
answer per topic (deleted, or not with a sentence), never a 500."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry
from console.topics import bulk
from storeadapter.engine import StoreError
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

URL = "/api/v1/selected/topics/delete/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def topics(store):
    for name in ("team-a.orders", "team-a.bills", "team-b.users"):
        store.create_topic(name, 1)
    store.append("team-a.orders", b"m", queue=0)
    return store


def names(store) -> set[str]:
    return {info.name for info in store.topics()}


@pytest.mark.parametrize("client_name", CLIENTS)
def test_deleting_selected_topics_needs_the_admin_role(clients, topics, client_name):
    response = clients[client_name].post(
        URL, {"topics": ["team-a.bills"], "confirm": "1"}, format="json"
    )

    assert response.status_code == expected_status(client_name, "admin", 200)


def test_the_selected_topics_are_deleted_each_with_its_outcome(as_admin, topics):
    response = as_admin.post(
        URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "2"}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["deleted"], body["failed"]) == (2, 0)
    assert body["results"] == [
        {"topic": "team-a.orders", "deleted": True, "messages": 1, "error": None},
        {"topic": "team-a.bills", "deleted": True, "messages": 0, "error": None},
    ]
    assert names(topics) == {"team-b.users"}


def test_the_confirmation_may_be_the_topics_names(as_admin, topics):
    response = as_admin.post(
        URL,
        {"topics": ["team-a.orders", "team-a.bills"], "confirm": "team-a.bills team-a.orders"},
        format="json",
    )

    assert response.status_code == 200
    assert names(topics) == {"team-b.users"}


def test_a_wrong_confirmation_deletes_nothing_and_says_what_to_type(as_admin, topics):
    response = as_admin.post(
        URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "3"}, format="json"
    )

    assert response.status_code == 400
    assert "confirm" in error_of(response)["details"]["fields"]
    assert "That is not 2 nor the topics' names" in error_of(response)["message"]
    assert names(topics) == {"team-a.orders", "team-a.bills", "team-b.users"}


def test_each_deleted_topic_is_audited_on_its_own(as_admin, topics):
    as_admin.post(URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "2"}, format="json")

    rows = AuditEntry.objects.filter(action="topic.delete").order_by("pk")
    assert [row.target for row in rows] == ["topic team-a.orders", "topic team-a.bills"]


@pytest.fixture
def team_a_admin(django_user_model) -> APIClient:
    role = Group.objects.create(name="team-a-admins")
    RoleRule.objects.create(
        role=role, kind="topic", pattern="team-a.*", actions=["view", "read", "manage"]
    )
    RoleRule.objects.create(role=role, kind="topic", pattern="team-b.*", actions=["view"])
    user = django_user_model.objects.create_user(username="ann", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_topic_the_user_may_not_manage_refuses_the_request_whole(team_a_admin, topics):
    response = team_a_admin.post(
        URL, {"topics": ["team-a.orders", "team-b.users"], "confirm": "2"}, format="json"
    )

    assert response.status_code == 403
    assert "team-b.users" in error_of(response)["message"]
    assert "team-a.orders" not in error_of(response)["message"]
    assert names(topics) == {"team-a.orders", "team-a.bills", "team-b.users"}


def test_a_scoped_role_deletes_its_own_topics(team_a_admin, topics):
    response = team_a_admin.post(
        URL, {"topics": ["team-a.orders", "team-a.bills"], "confirm": "2"}, format="json"
    )

    assert response.status_code == 200
    assert names(topics) == {"team-b.users"}


def test_a_topic_that_is_not_there_deletes_none(as_admin, topics):
    response = as_admin.post(
        URL, {"topics": ["team-a.orders", "nope"], "confirm": "2"}, format="json"
    )

    assert response.status_code == 404
    assert "nope" in error_of(response)["message"]
    assert "team-a.orders" in names(topics)


def test_a_topic_that_fails_is_answered_with_its_sentence_and_the_others_go_on(
    as_admin, topics, monkeypatch
):
    real = bulk.operations.delete_topic

    def failing(user, name):
        if name == "team-a.bills":
            raise StoreError("the disk refused to remove its files")
        return real(user, name)

    monkeypatch.setattr(bulk.operations, "delete_topic", failing)

    response = as_admin.post(
        URL, {"topics": ["team-a.bills", "team-a.orders"], "confirm": "2"}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["deleted"], body["failed"]) == (1, 1)
    assert body["results"][0] == {
        "topic": "team-a.bills",
        "deleted": False,
        "messages": None,
        "error": "the disk refused to remove its files",
    }
    assert names(topics) == {"team-a.bills", "team-b.users"}


@pytest.mark.parametrize(
    "body",
    [
        {"topics": [], "confirm": "0"},
        {"topics": ["x" * 400], "confirm": "1"},
        {"topics": [f"t{i}" for i in range(101)], "confirm": "101"},
        {"topics": "team-a.orders", "confirm": "1"},
        {"topics": ["team-a.orders"]},
    ],
)
def test_a_selection_that_is_not_one_is_a_400(as_admin, topics, body):
    response = as_admin.post(URL, body, format="json")

    assert response.status_code == 400
    assert error_of(response)["message"]
