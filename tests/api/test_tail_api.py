"""/api/v1/topics/<topic>/tail/ (issue 34, item 2): the live tail through the API: from a
cursor, long polling through the store's pull, a rate cap that says what it dropped, the
long-poll caps of pulls, roles and masking as for reading; never a group's offset moved."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import ApiToken, MaskRule, RoleRule
from console.api.long_polls import long_poll_slot
from storeadapter.engine import Message
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

TAIL = "/api/v1/topics/orders/tail/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    """Topic orders: 3 queues, each holding two old messages."""
    store.create_topic("orders", queues=3)
    store.append_batch("orders", [Message(f"old{i}", queue=i % 3) for i in range(6)])
    return store


def tail(client, **query):
    response = client.get(TAIL, query)
    assert response.status_code == 200, response.content
    return response.json()


def bodies(answer: dict) -> list[str]:
    return [m["body"] for m in answer["messages"]]


@pytest.mark.parametrize("client_name", CLIENTS)
def test_tailing_needs_the_viewer_role(clients, orders, client_name):
    response = clients[client_name].get(TAIL)

    assert response.status_code == expected_status(client_name, "viewer", 200)


def test_a_tail_starts_at_the_queues_ends(as_viewer, orders):
    answer = tail(as_viewer)

    assert answer["messages"] == []
    assert answer["dropped"] == 0
    assert answer["queues"] == [0, 1, 2]
    assert answer["cursor"].partition("@")[0] == "0:2,1:2,2:2"


def test_messages_appended_past_the_cursor_come_in_append_order(as_viewer, orders):
    cursor = tail(as_viewer)["cursor"]
    for n, queue in enumerate((2, 0, 1, 0)):
        orders.append("orders", f"new{n}".encode(), queue=queue)

    answer = tail(as_viewer, cursor=cursor)

    assert bodies(answer) == ["new0", "new1", "new2", "new3"]
    assert answer["dropped"] == 0
    assert tail(as_viewer, cursor=answer["cursor"])["messages"] == []


def test_a_tail_of_chosen_queues_leaves_the_others_out(as_viewer, orders):
    cursor = tail(as_viewer, queues="0,2")["cursor"]
    for queue in (0, 1, 2):
        orders.append("orders", f"to{queue}".encode(), queue=queue)

    answer = tail(as_viewer, queues="0,2", cursor=cursor)

    assert bodies(answer) == ["to0", "to2"]
    assert answer["queues"] == [0, 2]


def test_a_waiting_poll_answers_a_message_appended_while_it_waits(as_viewer, orders):
    cursor = tail(as_viewer)["cursor"]
    later = threading.Timer(0.3, lambda: orders.append("orders", b"late", queue=1))
    later.start()
    began = time.monotonic()

    answer = tail(as_viewer, cursor=cursor, wait=10)

    later.join()
    assert bodies(answer) == ["late"]
    assert time.monotonic() - began < 10


def test_a_poll_that_waits_in_vain_answers_nothing_and_the_same_place(as_viewer, orders):
    cursor = tail(as_viewer)["cursor"]

    answer = tail(as_viewer, cursor=cursor, wait=0.2)

    assert answer["messages"] == []
    assert answer["cursor"].partition("@")[0] == cursor.partition("@")[0]


def test_past_the_rate_cap_the_newest_are_shown_and_the_others_counted_dropped(as_viewer, orders):
    cursor = tail(as_viewer, rate=3)["cursor"]
    orders.append_batch("orders", [Message(f"n{i}", queue=i % 3) for i in range(10)])

    answer = tail(as_viewer, rate=3, cursor=cursor)

    assert bodies(answer) == ["n7", "n8", "n9"]
    assert answer["dropped"] == 7
    assert tail(as_viewer, rate=3, cursor=answer["cursor"], wait=1.5)["messages"] == []


def test_an_empty_bucket_keeps_messages_for_the_next_token_without_dropping(as_viewer, orders):
    cursor = tail(as_viewer, rate=1)["cursor"]
    orders.append("orders", b"first", queue=0)
    spent = tail(as_viewer, rate=1, cursor=cursor)
    orders.append("orders", b"second", queue=0)

    at_once = tail(as_viewer, rate=1, cursor=spent["cursor"])
    after_a_token = tail(as_viewer, rate=1, cursor=at_once["cursor"], wait=3)

    assert bodies(spent) == ["first"]
    assert (at_once["messages"], at_once["dropped"]) == ([], 0)
    assert (bodies(after_a_token), after_a_token["dropped"]) == (["second"], 0)


def test_tailing_never_moves_or_makes_a_groups_offsets(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 1)
    cursor = tail(as_viewer)["cursor"]
    orders.append_batch("orders", [Message(f"n{i}", queue=i % 3) for i in range(6)])

    answer = tail(as_viewer, cursor=cursor, wait=1)
    tail(as_viewer, cursor=answer["cursor"], wait=0.1)

    assert len(answer["messages"]) == 6
    assert orders.committed_offset("billing", "orders", 0) == 1
    assert [orders.committed_offset("billing", "orders", q) for q in (1, 2)] == [None, None]
    assert orders.groups() == ["billing"]
    assert len(orders.offset_history("billing")) == 1


def test_a_cursor_past_a_queues_end_starts_at_its_end(as_viewer, orders):
    orders.append("orders", b"after", queue=0)
    answer = tail(as_viewer, queues="0", cursor="0:999999@0")

    assert answer["messages"] == []
    assert answer["cursor"].partition("@")[0] == "0:3"


def test_a_cursor_without_a_followed_queue_starts_it_at_its_end(as_viewer, orders):
    orders.append("orders", b"on1", queue=1)

    answer = tail(as_viewer, queues="0,1", cursor="0:2@0")

    assert answer["messages"] == []
    assert answer["cursor"].partition("@")[0] == "0:2,1:3"


def test_a_cursor_that_is_no_cursor_is_refused(as_viewer, orders):
    response = as_viewer.get(TAIL, {"cursor": "queue 0 at 5"})

    assert response.status_code == 400
    assert "cursor" in error_of(response)["details"]["fields"]


def test_queues_that_are_no_list_of_ids_are_refused(as_viewer, orders):
    response = as_viewer.get(TAIL, {"queues": "0;1"})

    assert response.status_code == 400
    assert "queues" in error_of(response)["details"]["fields"]


def test_a_queue_the_topic_does_not_have_is_not_found(as_viewer, orders):
    response = as_viewer.get(TAIL, {"queues": "0,7"})

    assert response.status_code == 404
    assert error_of(response)["code"] == "queue_not_found"


def test_a_topic_that_does_not_exist_is_not_found(as_viewer, orders):
    response = as_viewer.get("/api/v1/topics/nothere/tail/")

    assert response.status_code == 404


def test_a_waiting_tail_counts_among_the_long_polls_of_its_token(settings, as_viewer, orders):
    settings.TIDEMARK_LONG_POLLS_PER_TOKEN = 1
    token = ApiToken.objects.get(user=as_viewer.user)
    with long_poll_slot(f"token:{token.pk}", 5):
        refused = as_viewer.get(TAIL, {"wait": 5})
        at_once = as_viewer.get(TAIL)

    assert refused.status_code == 429
    assert refused["Retry-After"] == "5"
    assert at_once.status_code == 200


# Roles on topics, and masking


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


def test_a_role_that_may_not_read_the_topic_may_not_tail_it(team_user, orders):
    response = team_user.get(TAIL)

    assert response.status_code == 403


def test_a_role_that_reads_the_topic_tails_it(team_user, store):
    store.create_topic("team-orders", 1)
    cursor = team_user.get("/api/v1/topics/team-orders/tail/").json()["cursor"]
    store.append("team-orders", b"ours", queue=0)

    answer = team_user.get("/api/v1/topics/team-orders/tail/", {"cursor": cursor}).json()

    assert bodies(answer) == ["ours"]


def test_a_user_who_reads_the_topic_masked_tails_it_masked(team_user, store):
    store.create_topic("cards", 1)
    MaskRule.objects.create(pattern="cards", part="body", field="card.number", how="mask")
    cursor = team_user.get("/api/v1/topics/cards/tail/").json()["cursor"]
    store.append("cards", json.dumps({"card": {"number": "4111"}}).encode(), queue=0)

    answer = team_user.get("/api/v1/topics/cards/tail/", {"cursor": cursor, "wait": 1}).json()

    assert [json.loads(body) for body in bodies(answer)] == [{"card": {"number": "****"}}]


def test_the_schema_describes_the_tail(as_viewer):
    schema = as_viewer.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/topics/{topic}/tail/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"topic", "queues", "cursor", "wait", "rate"} <= names
    assert "429" in operation["responses"]


def test_queues_far_apart_of_a_wide_topic_are_each_followed(as_viewer, store):
    store.create_topic("wide", queues=64)
    url = "/api/v1/topics/wide/tail/"
    cursor = as_viewer.get(url, {"queues": "3,60"}).json()["cursor"]
    for queue in (60, 30, 3):
        store.append("wide", f"to{queue}".encode(), queue=queue)

    answer = as_viewer.get(url, {"queues": "3,60", "cursor": cursor}).json()

    assert bodies(answer) == ["to60", "to3"]
    assert answer["cursor"].partition("@")[0] == "3:1,60:1"
