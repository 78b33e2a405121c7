"""/api/v1/topics/<topic>/filter/ (issue 34, item 1): the messages a filter expression
matches, scanned by the engine's crate within a budget, with a cursor to go on; an
expression that does not compile is a 400 that says where; roles and masking as for
reading."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import MaskRule, RoleRule
from storeadapter.engine import Message
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

FILTER = "/api/v1/topics/orders/filter/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    """Topic orders: 2 queues, 10 orders with totals 0, 50, ..., 450; odd ones paid."""
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            Message(
                json.dumps({"order": {"total": i * 50, "id": i}}),
                tag="paid" if i % 2 else "open",
                queue=i % 2,
            )
            for i in range(10)
        ],
    )
    return store


def ids(answer: dict) -> list[int]:
    return sorted(json.loads(m["body"])["order"]["id"] for m in answer["messages"])


@pytest.mark.parametrize("client_name", CLIENTS)
def test_filtering_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(FILTER, {"expression": "true"})

    assert response.status_code == expected_status(client_name, "viewer", 200)


def test_the_expression_selects_by_body_json_and_tag(as_viewer, orders):
    answer = as_viewer.get(FILTER, {"expression": 'body.order.total > 100 && tag == "paid"'}).json()

    assert ids(answer) == [3, 5, 7, 9]
    assert answer["cursor"] is None and answer["stopped"] == "end" and answer["scanned"] == 10


def test_the_budget_stops_the_scan_and_the_cursor_goes_on(as_viewer, orders):
    first = as_viewer.get(FILTER, {"expression": "true", "max_records": 4}).json()
    rest = as_viewer.get(FILTER, {"expression": "true", "cursor": first["cursor"]}).json()

    assert first["stopped"] == "records" and first["scanned"] == 4
    assert sorted(ids(first) + ids(rest)) == list(range(10))


def test_chosen_queues_only(as_viewer, orders):
    answer = as_viewer.get(FILTER, {"expression": "true", "queues": "1"}).json()

    assert ids(answer) == [1, 3, 5, 7, 9]


def test_an_expression_that_does_not_compile_is_a_400_with_its_position(as_viewer, orders):
    response = as_viewer.get(FILTER, {"expression": 'tag == "paid" && colour == 1'})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_filter"
    assert error["details"]["position"] == 17 and error["details"]["column"] == 18


def test_evaluation_errors_are_counted_not_failed(as_viewer, orders):
    answer = as_viewer.get(FILTER, {"expression": "body.nothing.here > 1"}).json()

    assert answer["messages"] == [] and answer["errors"] == 10 and answer["first_error"]


def test_a_topic_that_does_not_exist_is_a_404(as_viewer, orders):
    response = as_viewer.get("/api/v1/topics/nowhere/filter/", {"expression": "true"})

    assert response.status_code == 404


@pytest.fixture
def team_user(django_user_model):
    """A user whose role views every topic and reads only team-*."""
    role = Group.objects.create(name="team-a")
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    RoleRule.objects.create(role=role, kind="topic", pattern="team-*", actions=["read"])
    user = django_user_model.objects.create_user(username="tina", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_role_that_may_not_read_the_topic_may_not_filter_it(team_user, orders):
    assert team_user.get(FILTER, {"expression": "true"}).status_code == 403


def test_a_masked_reader_filters_what_they_see_not_the_hidden_values(team_user, store):
    store.create_topic("cards", 1)
    MaskRule.objects.create(pattern="cards", part="body", field="card.number", how="mask")
    store.append("cards", json.dumps({"card": {"number": "4111"}}).encode(), queue=0)

    hidden = team_user.get(
        "/api/v1/topics/cards/filter/", {"expression": 'body.card.number == "4111"'}
    ).json()
    shown = team_user.get(
        "/api/v1/topics/cards/filter/", {"expression": 'body.card.number == "****"'}
    ).json()

    assert hidden["messages"] == [] and len(shown["messages"]) == 1


def test_the_schema_describes_the_filter(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/topics/{topic}/filter/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"expression", "cursor", "queues", "max_records", "max_seconds"} <= names
    assert "400" in operation["responses"] and "200" in operation["responses"]
