"""GET /api/v1/messages/<id>/consumption/ (issue 34, item 3): was the message consumed by
each group consuming its topic, from the committed offsets, with the group's retry and DLQ
copies of it; only the groups the caller's roles may view."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import RoleRule
from storeadapter.engine import dlq_topic

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(store):
    store.create_topic("orders", 1)
    ids = [store.append("orders", f"m{n}".encode(), key=f"k{n}").message_id for n in range(5)]
    store.commit_offset("billing", "orders", 0, 3)
    store.commit_offset("shipping", "orders", 0, 1)
    return ids


def consumption(client, message_id: str):
    return client.get(f"/api/v1/messages/{message_id}/consumption/")


def test_each_group_consuming_the_topic_says_whether_it_consumed_the_message(as_viewer, orders):
    response = consumption(as_viewer, orders[2])

    assert response.status_code == 200
    body = response.json()
    assert (body["topic"], body["queue"], body["queue_offset"]) == ("orders", 0, 2)
    assert [
        (g["group"], g["state"], g["committed_offset"], g["before"]) for g in body["groups"]
    ] == [
        ("billing", "CONSUMED", 3, 0),
        ("shipping", "NOT_YET", 1, 1),
    ]


def test_a_dead_lettered_copy_is_listed_with_the_group(as_viewer, store, orders):
    [message] = store.read("orders", 0, 1, 1)
    store.create_topic(dlq_topic("billing"), 1)
    copy = store.append(
        dlq_topic("billing"),
        message.body,
        key=list(message.keys),
        properties={"ORIGIN_MESSAGE_ID": message.message_id, "RETRY_COUNT": "3"},
    )

    billing = consumption(as_viewer, orders[1]).json()["groups"][0]

    assert billing["copies"] == [
        {
            "message_id": copy.message_id,
            "topic": dlq_topic("billing"),
            "queue": 0,
            "queue_offset": 0,
            "state": "DEAD_LETTERED",
            "retries": 3,
        }
    ]


def test_a_scoped_role_sees_only_the_groups_it_may_view(orders, django_user_model):
    role = Group.objects.create(name="team-billing")
    RoleRule.objects.create(role=role, kind="topic", pattern="orders", actions=["view", "read"])
    RoleRule.objects.create(role=role, kind="group", pattern="billing", actions=["view"])
    user = django_user_model.objects.create_user(username="bill", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)

    groups = consumption(client, orders[0]).json()["groups"]

    assert [g["group"] for g in groups] == ["billing"]


def test_a_message_of_a_topic_the_role_may_not_read_is_403(orders, django_user_model):
    role = Group.objects.create(name="team-other")
    RoleRule.objects.create(role=role, kind="topic", pattern="other", actions=["view", "read"])
    user = django_user_model.objects.create_user(username="otto2", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)

    assert consumption(client, orders[0]).status_code == 403


def test_an_unknown_message_is_404(as_viewer, orders):
    assert consumption(as_viewer, "0" * 24).status_code == 404


def test_the_schema_describes_the_states(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    assert "/api/v1/messages/{message_id}/consumption/" in schema["paths"]
    assert schema["components"]["schemas"]["ConsumptionStateEnum"]["enum"] == [
        "CONSUMED",
        "NOT_YET",
        "LOST_TO_RETENTION",
        "DEAD_LETTERED",
    ]
