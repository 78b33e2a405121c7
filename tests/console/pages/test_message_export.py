"""/messages/export/: any search's result set (by key, by time, a queue range) as JSON
Lines, bounded by a budget, its last line saying how far it got and how to continue;
masked, role-checked and audited as the search page is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from console.accounts.models import MaskRule, RoleRule
from console.audit.models import AuditEntry
from console.messages import exports
from storeadapter.engine import Message, clock

pytestmark = [pytest.mark.django_db]

#: 2024-05-01 12:00:00 UTC, in milliseconds.
T0 = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
EXPORT = "/messages/export/"


@pytest.fixture
def now(monkeypatch):
    current = {"ms": T0}
    monkeypatch.setattr(clock, "now_ms", lambda: current["ms"])
    return current


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def local(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def lines_of(response) -> tuple[list[dict], dict]:
    """(the messages, the trailer) of an export."""
    data = b"".join(response.streaming_content).decode("utf-8")
    lines = [json.loads(line) for line in data.splitlines()]
    assert "export" in lines[-1] and all("message_id" in line for line in lines[:-1])
    return lines[:-1], lines[-1]["export"]


def export_all(client, params: dict) -> tuple[list[dict], int]:
    """Every message of an export followed through its continue URLs; and the requests."""
    found, requests = [], 0
    response = client.get(EXPORT, params)
    while True:
        requests += 1
        assert response.status_code == 200
        messages, trailer = lines_of(response)
        found += messages
        if trailer["complete"]:
            return found, requests
        url = urlsplit(trailer["continue"])
        assert url.path == EXPORT
        response = client.get(EXPORT, dict(parse_qsl(url.query)))


def test_a_key_export_holds_every_message_with_the_key_newest_first(as_viewer, orders, now):
    sent = []
    for i in range(5):
        now["ms"] = T0 + i
        sent.append(orders.append("orders", f"v{i}", key="k").message_id)
    orders.append("orders", "other", key="other")

    response = as_viewer.get(EXPORT, {"mode": "key", "topic": "orders", "key": "k"})

    messages, trailer = lines_of(response)
    assert [m["message_id"] for m in messages] == sent[::-1]
    assert trailer == {
        "complete": True,
        "messages": 5,
        "stopped_by": None,
        "next": None,
        "continue": None,
    }
    assert response["Content-Disposition"] == 'attachment; filename="orders-key.jsonl"'


def test_a_key_export_stopped_by_its_budget_continues_without_repeats(as_viewer, orders, now):
    sent = []
    for i in range(7):
        now["ms"] = T0 + i // 3  # three messages a millisecond: the cut falls inside one
        sent.append(orders.append("orders", f"v{i}", key="k").message_id)

    first = as_viewer.get(EXPORT, {"mode": "key", "topic": "orders", "key": "k", "max_records": 2})
    messages, trailer = lines_of(first)
    assert len(messages) == 2
    assert (trailer["complete"], trailer["stopped_by"]) == (False, "records")
    assert trailer["next"] == {"until_ms": T0 + 1, "skip": 1}

    every, requests = export_all(
        as_viewer, {"mode": "key", "topic": "orders", "key": "k", "max_records": 2}
    )
    assert [m["message_id"] for m in every] == sent[::-1]
    assert requests == 4


def test_a_time_export_merges_the_queues_oldest_first_and_continues(as_viewer, orders, now):
    now["ms"] = T0 - 60_000
    orders.append("orders", "too early", queue=0)
    sent = []
    for i in range(6):
        now["ms"] = T0 + i // 2
        sent.append(orders.append("orders", f"t{i}", queue=i % 2).message_id)

    params = {"mode": "time", "topic": "orders", "at": local(T0), "max_records": 3}
    every, requests = export_all(as_viewer, params)

    assert [m["message_id"] for m in every] == sent
    assert requests == 2


def test_a_queue_range_export_ends_with_where_to_continue(as_viewer, orders):
    orders.append_batch("orders", [Message(f"m{i}".encode(), queue=0) for i in range(5)])

    response = as_viewer.get(EXPORT, {"topic": "orders", "queue": 0, "max_records": 3})

    messages, trailer = lines_of(response)
    assert [m["queue_offset"] for m in messages] == [0, 1, 2]
    assert trailer["next"] == {"from": 3}
    rest = as_viewer.get(trailer["continue"])
    messages, trailer = lines_of(rest)
    assert [m["queue_offset"] for m in messages] == [3, 4]
    assert trailer["complete"] is True


def test_an_export_out_of_time_says_so(as_viewer, orders, monkeypatch):
    orders.append_batch("orders", [Message(f"m{i}".encode(), queue=0) for i in range(5)])
    ticks = iter(range(0, 1000, 2))
    monkeypatch.setattr(exports.time, "monotonic", lambda: next(ticks))

    response = as_viewer.get(EXPORT, {"topic": "orders", "queue": 0, "max_seconds": 5})

    messages, trailer = lines_of(response)
    assert len(messages) == 2
    assert (trailer["complete"], trailer["stopped_by"]) == (False, "seconds")
    assert trailer["next"] == {"from": 2}


def test_key_search_results_link_to_their_export(as_viewer, orders):
    orders.append("orders", "v", key="k")

    response = as_viewer.get("/messages/", {"mode": "key", "topic": "orders", "key": "k"})

    assert response.context["results"].export_url == (
        "/messages/export/?mode=key&topic=orders&key=k"
    )
    assert b"Export JSON Lines" in response.content


def test_time_search_results_link_to_their_export(as_viewer, orders, now):
    orders.append("orders", "v", queue=0)

    response = as_viewer.get("/messages/", {"mode": "time", "topic": "orders", "at": local(T0)})

    url = response.context["results"].export_url
    assert url.startswith("/messages/export/?") and "mode=time" in url
    assert lines_of(as_viewer.get(url))[1]["messages"] == 1


def test_a_bad_budget_shows_the_form_with_the_error(as_viewer, orders):
    response = as_viewer.get(
        EXPORT, {"mode": "key", "topic": "orders", "key": "k", "max_records": 0}
    )

    assert response.status_code == 400
    assert "max_records" in str(response.context["form"].non_field_errors())


def test_an_export_by_id_is_refused_with_a_sentence(as_viewer, orders):
    response = as_viewer.get(EXPORT, {"mode": "id", "id": "0" * 24})

    assert response.status_code == 400
    assert "search by key" in str(response.context["form"].non_field_errors())


@pytest.fixture
def looker(django_user_model):
    """May view every topic, read none: reads masked where a mask rule covers."""
    role = Group.objects.create(name="team-support")
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    user = django_user_model.objects.create_user(username="sue", password=None)
    user.groups.add(role)
    client = Client()
    client.force_login(user)
    return client


def test_a_key_export_is_masked_as_the_pages_are(looker, store):
    store.create_topic("cards", 1)
    store.append("cards", json.dumps({"number": "4111-1111"}), key="ann", queue=0)
    MaskRule.objects.create(pattern="cards", part="body", field="number", how="mask")

    response = looker.get(EXPORT, {"mode": "key", "topic": "cards", "key": "ann"})

    messages, _ = lines_of(response)
    assert json.loads(messages[0]["body"]) == {"number": "****"}


def test_a_topic_the_role_may_not_read_is_not_exported(looker, orders):
    orders.append("orders", "v", key="k")

    response = looker.get(EXPORT, {"mode": "key", "topic": "orders", "key": "k"})

    assert response.status_code == 403


def test_an_export_is_an_audited_read(as_viewer, orders, settings):
    settings.TIDEMARK_AUDIT_READS = True
    orders.append("orders", "v", key="k")

    response = as_viewer.get(EXPORT, {"mode": "key", "topic": "orders", "key": "k"})
    lines_of(response)

    row = AuditEntry.objects.get(action="read.export")
    assert row.target == "topic orders"
    assert "mode=key" in row.detail and "key=k" in row.detail
    assert row.after == {"count": 1}  # said once the export was sent


def test_a_key_export_reads_the_index_a_chunk_at_a_time_across_ties(
    as_viewer, orders, now, monkeypatch
):
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)
    sent = []
    for i in range(9):
        now["ms"] = T0 + i // 4  # chunks of 2 end inside a millisecond of 4
        sent.append(orders.append("orders", f"v{i}", key="k").message_id)

    messages, trailer = lines_of(
        as_viewer.get(EXPORT, {"mode": "key", "topic": "orders", "key": "k"})
    )

    assert [m["message_id"] for m in messages] == sent[::-1]
    assert trailer["complete"] is True


def test_a_skip_the_seconds_do_not_cover_stops_where_it_was_asked(
    as_viewer, orders, now, monkeypatch
):
    for i in range(5):
        orders.append("orders", f"v{i}", key="k")
    ticks = iter(range(0, 1000, 2))
    monkeypatch.setattr(exports.time, "monotonic", lambda: next(ticks))
    asked = {"mode": "key", "topic": "orders", "key": "k", "max_seconds": 3}

    messages, trailer = lines_of(as_viewer.get(EXPORT, {**asked, "until_ms": T0, "skip": 4}))

    assert messages == []
    assert (trailer["stopped_by"], trailer["next"]) == ("seconds", {"until_ms": T0, "skip": 4})


def test_expression_search_results_link_to_their_export(as_viewer, orders):
    orders.append("orders", "v", tag="paid", queue=0)
    search = {"mode": "filter", "topic": "orders", "expression": 'tag == "paid"'}

    response = as_viewer.get("/messages/", search)

    url = response.context["results"].export_url
    assert urlsplit(url).path == EXPORT and dict(parse_qsl(urlsplit(url).query)) == search
    assert b"Export JSON Lines" in response.content


def test_an_expression_export_holds_every_match_and_continues_from_its_cursor(as_viewer, orders):
    orders.append_batch(
        "orders",
        [Message(f"m{i}".encode(), tag="paid" if i % 2 else "open", queue=i % 2) for i in range(8)],
    )
    search = {"mode": "filter", "topic": "orders", "expression": 'tag == "paid"'}

    first = as_viewer.get(EXPORT, {**search, "max_records": 3})
    messages, trailer = lines_of(first)
    assert len(messages) == 3 and trailer["stopped_by"] == "records"
    assert "cursor" in trailer["next"] and "mode=filter" in trailer["continue"]
    found, requests = export_all(as_viewer, dict(parse_qsl(urlsplit(trailer["continue"]).query)))

    assert [m["body"] for m in messages + found] == ["m1", "m3", "m5", "m7"]
    assert first["Content-Disposition"] == 'attachment; filename="orders-filter.jsonl"'


def test_an_expression_export_that_does_not_compile_shows_the_form(as_viewer, orders):
    response = as_viewer.get(EXPORT, {"mode": "filter", "topic": "orders", "expression": "tag =="})

    assert response.status_code == 400
    assert response.context["form"].errors["expression"]


def test_an_expression_search_that_matched_none_links_an_export_only_if_it_stopped_short(
    as_viewer, orders, monkeypatch
):
    from console.messages import search

    orders.append_batch("orders", [Message(b"open", tag="open", queue=0) for _ in range(3)])
    query = {"mode": "filter", "topic": "orders", "expression": 'tag == "paid"'}
    whole = as_viewer.get("/messages/", query)
    scan = search.filters.scan
    monkeypatch.setattr(
        search.filters, "scan", lambda *args, **kwargs: scan(*args, **kwargs, max_records=1)
    )

    stopped = as_viewer.get("/messages/", query)

    assert whole.context["results"].export_url == ""
    assert stopped.context["results"].export_url.startswith(EXPORT)
