"""/api/v1/topics/<topic>/filter/export/ (issue 34, item 5): every message a filter
expression matches as JSON Lines, bounded by max_records and max_seconds; the last line
says how far it got and the URL (with the scan's cursor) that continues it; a bad
expression is a 400 that says where; read roles, masking and the read audit as the
other exports."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import MaskRule, RoleRule
from console.audit.models import AuditEntry
from storeadapter.engine import Message
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

EXPORT = "/api/v1/topics/orders/filter/export/"
PAID = 'tag == "paid"'
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    """Topic orders: 2 queues, 10 orders (id i in queue i % 2); odd ones paid."""
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            Message(json.dumps({"id": i}), tag="paid" if i % 2 else "open", queue=i % 2)
            for i in range(10)
        ],
    )
    return store


def split(response) -> tuple[list[int], dict]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    text = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    return [json.loads(m["body"])["id"] for m in lines[:-1]], lines[-1]["export"]


@pytest.mark.parametrize("client_name", CLIENTS)
def test_exporting_a_filter_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(EXPORT, {"expression": "true"})

    assert response.status_code == expected_status(client_name, "viewer", 200)


def test_a_filter_export_holds_every_match(as_viewer, orders):
    found, trailer = split(as_viewer.get(EXPORT, {"expression": PAID}))

    assert found == [1, 3, 5, 7, 9]
    assert trailer["complete"] is True and trailer["messages"] == 5


def test_a_filter_export_of_some_queues_from_a_cursor(as_viewer, orders):
    found, _ = split(as_viewer.get(EXPORT, {"expression": "true", "queues": "0", "cursor": "0:2"}))

    assert found == [4, 6, 8]


def test_a_filter_export_stopped_by_its_budget_continues_through_its_trailer(as_viewer, orders):
    found, trailer = split(as_viewer.get(EXPORT, {"expression": "true", "max_records": 3}))
    assert (trailer["complete"], trailer["stopped_by"]) == (False, "records")
    assert set(trailer["next"]) == {"cursor"}
    requests = 1
    while not trailer["complete"]:
        url = urlsplit(trailer["continue"])
        assert url.path == EXPORT
        query = dict(parse_qsl(url.query))
        assert query["cursor"] == trailer["next"]["cursor"] and query["max_records"] == "3"
        more, trailer = split(as_viewer.get(EXPORT, query))
        found += more
        requests += 1

    assert found == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9] and requests == 4


def test_an_expression_that_does_not_compile_is_a_400_with_its_position(as_viewer, orders):
    response = as_viewer.get(EXPORT, {"expression": 'tag == "paid" && colour == 1'})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_filter"
    assert error["details"]["position"] == 17 and error["details"]["column"] == 18


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"expression": PAID, "cursor": "nope"},
        {"expression": PAID, "queues": "a,b"},
        {"expression": PAID, "max_records": 0},
        {"expression": PAID, "max_seconds": 100_000},
    ],
)
def test_a_bad_filter_export_is_a_400(as_viewer, orders, query):
    assert as_viewer.get(EXPORT, query).status_code == 400


def test_a_topic_or_queue_that_does_not_exist_is_a_404(as_viewer, orders):
    nowhere = as_viewer.get("/api/v1/topics/nowhere/filter/export/", {"expression": "true"})
    no_queue = as_viewer.get(EXPORT, {"expression": "true", "queues": "7"})

    assert (nowhere.status_code, no_queue.status_code) == (404, 404)


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


def test_a_role_that_may_not_read_the_topic_may_not_export_it(team_user, orders):
    assert team_user.get(EXPORT, {"expression": "true"}).status_code == 403


def test_a_masked_reader_exports_what_they_see(team_user, store):
    store.create_topic("cards", 1)
    MaskRule.objects.create(pattern="cards", part="body", field="card.number", how="mask")
    store.append("cards", json.dumps({"card": {"number": "4111"}}).encode(), queue=0)
    url = "/api/v1/topics/cards/filter/export/"

    hidden = team_user.get(url, {"expression": 'body.card.number == "4111"'})
    shown = team_user.get(url, {"expression": 'body.card.number == "****"'})

    assert b"".join(hidden.streaming_content).count(b"\n") == 1
    text = b"".join(shown.streaming_content).decode()
    assert text.count("\n") == 2 and "4111" not in text


def test_a_filter_export_is_an_audited_read(as_viewer, orders, settings):
    settings.TIDEMARK_AUDIT_READS = True

    split(as_viewer.get(EXPORT, {"expression": PAID}))

    row = AuditEntry.objects.get(action="read.export")
    assert row.target == "topic orders" and "expression" in row.detail
    assert row.after == {"count": 5}


def test_the_schema_describes_the_filter_export(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/topics/{topic}/filter/export/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"expression", "cursor", "queues", "max_records", "max_seconds"} <= names
    assert "max_matches" not in names
    assert "application/x-ndjson" in operation["responses"]["200"]["content"]
    assert "400" in operation["responses"]
