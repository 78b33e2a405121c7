"""/api/v1/topics/<topic>/tail/export/ (issue 34, item 5): the live tail's results from a
cursor (the tail's: queue offsets) as JSON Lines in append order, optionally only what a
filter expression matches, bounded by max_records and max_seconds; the last line says how
far it got and the URL (with the tail cursor) that continues it; never a group's offset
moved."""

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

EXPORT = "/api/v1/topics/orders/tail/export/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
#: Where a tail of orders opened before the ten orders stands.
OPENED = "0:1,1:1@0"


@pytest.fixture
def orders(store):
    """Topic orders: 2 queues, one old message each, then 10 orders (id i in queue i % 2,
    appended in id order); odd ones paid."""
    store.create_topic("orders", queues=2)
    store.append_batch("orders", [Message('{"id": -1}', queue=q) for q in (0, 1)])
    store.append_batch(
        "orders",
        [
            Message(json.dumps({"id": i}), tag="paid" if i % 2 else "open", queue=i % 2)
            for i in range(10)
        ],
    )
    return store


def split(response) -> tuple[list[int], dict]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/x-ndjson")
    text = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    return [json.loads(m["body"])["id"] for m in lines[:-1]], lines[-1]["export"]


@pytest.mark.parametrize("client_name", CLIENTS)
def test_exporting_a_tail_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(EXPORT, {"cursor": OPENED})

    assert response.status_code == expected_status(client_name, "viewer", 200)


def test_a_tail_export_holds_what_arrived_past_the_cursor_in_append_order(as_viewer, orders):
    found, trailer = split(as_viewer.get(EXPORT, {"cursor": OPENED}))

    assert found == list(range(10))
    assert (trailer["complete"], trailer["messages"]) == (True, 10)


def test_a_tail_export_of_chosen_queues(as_viewer, orders):
    found, _ = split(as_viewer.get(EXPORT, {"cursor": OPENED, "queues": "1"}))

    assert found == [1, 3, 5, 7, 9]


def test_a_tail_export_holds_only_what_its_filter_matches(as_viewer, orders):
    found, _ = split(as_viewer.get(EXPORT, {"cursor": OPENED, "filter": 'tag == "open"'}))

    assert found == [0, 2, 4, 6, 8]


def test_a_tail_export_stopped_by_its_budget_continues_through_its_trailer(as_viewer, orders):
    found, trailer = split(as_viewer.get(EXPORT, {"cursor": OPENED, "max_records": 3}))
    assert (trailer["complete"], trailer["stopped_by"]) == (False, "records")
    assert set(trailer["next"]) == {"cursor"}
    while not trailer["complete"]:
        url = urlsplit(trailer["continue"])
        assert url.path == EXPORT
        query = dict(parse_qsl(url.query))
        assert query["cursor"] == trailer["next"]["cursor"] and query["max_records"] == "3"
        more, trailer = split(as_viewer.get(EXPORT, query))
        found += more

    assert found == list(range(10))


def test_a_filtered_tail_export_continues_with_its_filter(as_viewer, orders):
    query = {"cursor": OPENED, "filter": "tag == 'paid'", "max_records": 2}
    found, trailer = split(as_viewer.get(EXPORT, query))
    while not trailer["complete"]:
        more, trailer = split(
            as_viewer.get(EXPORT, dict(parse_qsl(urlsplit(trailer["continue"]).query)))
        )
        found += more

    assert found == [1, 3, 5, 7, 9]


def test_a_tail_export_needs_a_cursor(as_viewer, orders):
    response = as_viewer.get(EXPORT)

    assert response.status_code == 400
    assert "cursor" in error_of(response)["details"]["fields"]


def test_a_tail_export_with_a_bad_filter_says_where(as_viewer, orders):
    response = as_viewer.get(EXPORT, {"cursor": OPENED, "filter": "tag =="})

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_filter"


def test_a_tail_export_of_a_missing_queue_is_a_404(as_viewer, orders):
    response = as_viewer.get(EXPORT, {"cursor": OPENED, "queues": "7"})

    assert response.status_code == 404


def test_a_tail_export_never_moves_or_makes_a_groups_offsets(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    split(as_viewer.get(EXPORT, {"cursor": OPENED}))

    assert orders.committed_offset("billing", "orders", 0) == 1
    assert orders.committed_offset("billing", "orders", 1) is None
    assert orders.groups() == ["billing"]
    assert len(orders.offset_history("billing")) == 1


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


def test_a_role_that_may_not_read_the_topic_may_not_export_its_tail(team_user, orders):
    assert team_user.get(EXPORT, {"cursor": OPENED}).status_code == 403


def test_a_role_that_reads_the_topic_exports_its_tail(team_user, store):
    store.create_topic("team-orders", 1)
    store.append("team-orders", b'{"id": 7}', queue=0)

    found, _ = split(team_user.get("/api/v1/topics/team-orders/tail/export/", {"cursor": "0:0@0"}))

    assert found == [7]


def test_a_masked_reader_exports_the_tail_as_they_see_it(team_user, store):
    store.create_topic("cards", 1)
    MaskRule.objects.create(pattern="cards", part="body", field="card.number", how="mask")
    store.append("cards", json.dumps({"card": {"number": "4111"}}).encode(), queue=0)

    response = team_user.get("/api/v1/topics/cards/tail/export/", {"cursor": "0:0@0"})

    text = b"".join(response.streaming_content).decode()
    assert text.count("\n") == 2 and "4111" not in text


def test_a_tail_export_is_an_audited_read(as_viewer, orders, settings):
    settings.TIDEMARK_AUDIT_READS = True

    split(as_viewer.get(EXPORT, {"cursor": OPENED, "queues": "0"}))

    row = AuditEntry.objects.get(action="read.export")
    assert row.target == "topic orders" and "cursor" in row.detail
    assert row.after == {"count": 5}


def test_the_schema_describes_the_tail_export(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/topics/{topic}/tail/export/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"cursor", "queues", "filter", "max_records", "max_seconds"} <= names
    assert not {"wait", "rate"} & names
    assert "application/x-ndjson" in operation["responses"]["200"]["content"]


@pytest.mark.parametrize("expression", [None, "true"])
def test_a_tail_export_out_of_seconds_says_so_and_continues_where_it_stood(
    as_viewer, orders, monkeypatch, expression
):
    from types import SimpleNamespace

    from console.messages import exports

    ticks = iter(range(0, 10**6, 2))  # each look at the clock: 2 s later
    monkeypatch.setattr(exports, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    query = {"cursor": OPENED, "max_seconds": 1, **({"filter": expression} if expression else {})}

    found, trailer = split(as_viewer.get(EXPORT, query))

    assert (trailer["complete"], trailer["stopped_by"]) == (False, "seconds")
    monkeypatch.undo()
    rest, trailer = split(
        as_viewer.get(EXPORT, dict(parse_qsl(urlsplit(trailer["continue"]).query)))
    )
    assert found + rest == list(range(10)) and trailer["complete"] is True
