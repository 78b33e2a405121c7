"""/api/v1/groups/<group>/dlq/ and dlq/redrive/: a group's dead letters and their redrive."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from console.groups.dlq import MAX_REDRIVE_IDS
from tests.api.apitools import error_of, expected_status
from tests.worlds import DLQ, billing_before_dead_letters, dead_letter, orders_bodies

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
DLQ_URL = "/api/v1/groups/billing/dlq/"
REDRIVE = "/api/v1/groups/billing/dlq/redrive/"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (1 queue, 1 message), no dead letters yet."""
    return billing_before_dead_letters(store)


@pytest.fixture
def letters(billing):
    """Three dead letters of `billing`; returns their ids."""
    billing.create_topic(DLQ, 1)
    return [dead_letter(billing, n, f"dead-{n}".encode()) for n in range(3)]


def post(client, url, data=None):
    return client.post(url, data, format="json")


# Roles


@pytest.mark.parametrize("who", CLIENTS)
def test_redriving_needs_operator(clients, billing, letters, who):
    response = post(clients[who], REDRIVE, {"message_ids": letters[:1]})

    assert response.status_code == expected_status(who, "operator", 200)
    sent = who in ("operator", "admin")
    assert orders_bodies(billing) == ([b"first", b"dead-0"] if sent else [b"first"])


# List


def test_the_dead_letters_are_messages_with_origin_retries_and_error(as_viewer, letters):
    body = as_viewer.get(DLQ_URL).json()

    assert body["count"] == 3
    assert [d["message_id"] for d in body["results"]] == letters
    first = body["results"][0]
    assert (first["topic"], first["body"], first["keys"]) == (DLQ, "dead-0", ["k1"])
    assert (first["origin_topic"], first["origin_queue"], first["origin_offset"]) == (
        "orders",
        0,
        0,
    )
    assert first["origin_message_id"] == "0" * 24
    assert first["retry_count"] == 3
    assert first["last_error"] == "ValueError: bad total"


def test_the_dead_letters_are_paged(as_viewer, billing):
    billing.create_topic(DLQ, 2)
    for n in range(5):
        dead_letter(billing, n)

    first = as_viewer.get(DLQ_URL, {"page_size": 3}).json()
    second = as_viewer.get(DLQ_URL, {"page_size": 3, "page": 2}).json()

    assert first["count"] == 5
    assert len(first["results"]) == 3
    assert len(second["results"]) == 2
    ids = {d["message_id"] for d in first["results"] + second["results"]}
    assert len(ids) == 5


def test_missing_origin_properties_are_null(as_viewer, billing):
    billing.create_topic(DLQ, 1)
    billing.append(DLQ, b"odd", properties={"RETRY_COUNT": "many"})

    (letter,) = as_viewer.get(DLQ_URL).json()["results"]

    assert letter["origin_topic"] is None
    assert letter["origin_queue"] is None
    assert letter["retry_count"] is None
    assert letter["last_error"] == ""


def test_a_group_without_a_dlq_has_no_dead_letters(as_viewer, billing):
    body = as_viewer.get(DLQ_URL).json()

    assert (body["count"], body["results"]) == (0, [])


def test_the_dlq_of_an_unknown_group_is_404(as_viewer, billing):
    response = as_viewer.get("/api/v1/groups/nobody-here/dlq/")

    assert response.status_code == 404
    assert error_of(response)["code"] == "group_not_found"


def test_dead_letters_outlive_their_group(as_viewer, billing, letters):
    billing.delete_group("billing")

    body = as_viewer.get(DLQ_URL).json()

    assert body["count"] == 3


# Redrive


def test_redriving_ids_sends_them_back_and_is_audited(as_operator, billing, letters):
    response = post(as_operator, REDRIVE, {"message_ids": [letters[2], letters[0]]})

    assert response.status_code == 200
    body = response.json()
    assert (body["redriven"], body["sent"], body["duplicates"]) == (2, 2, 0)
    assert [(m["topic"], m["queue"], m["duplicate"]) for m in body["messages"]] == [
        ("orders", 0, False),
        ("orders", 0, False),
    ]
    assert orders_bodies(billing) == [b"first", b"dead-0", b"dead-2"]
    entry = AuditEntry.objects.get(action="dlq.redrive")
    assert (entry.username, entry.target) == ("otto", "group billing")
    assert entry.before == {"message_ids": [letters[2], letters[0]]}


def test_redriving_all_sends_every_dead_letter(as_operator, billing, letters):
    response = post(as_operator, REDRIVE, {"all": True})

    assert response.json()["sent"] == 3
    assert orders_bodies(billing) == [b"first", b"dead-0", b"dead-1", b"dead-2"]


def test_redriving_twice_sends_once_and_counts_duplicates(as_operator, billing, letters):
    post(as_operator, REDRIVE, {"message_ids": letters[:1]})

    body = post(as_operator, REDRIVE, {"message_ids": letters[:2]}).json()

    assert (body["redriven"], body["sent"], body["duplicates"]) == (2, 1, 1)
    assert [m["duplicate"] for m in body["messages"]] == [True, False]
    assert orders_bodies(billing) == [b"first", b"dead-0", b"dead-1"]


def test_repeated_ids_are_redriven_once(as_operator, letters):
    body = post(as_operator, REDRIVE, {"message_ids": [letters[0], letters[0]]}).json()

    assert body["redriven"] == 1


def test_redriving_all_with_no_dlq_sends_nothing(as_operator, billing):
    response = post(as_operator, REDRIVE, {"all": True})

    assert response.status_code == 200
    assert response.json() == {"redriven": 0, "sent": 0, "duplicates": 0, "messages": []}
    assert not AuditEntry.objects.exists()


def test_an_unknown_id_is_404_and_nothing_is_sent(as_operator, billing, letters):
    response = post(as_operator, REDRIVE, {"message_ids": [letters[0], "F" * 24]})

    assert response.status_code == 404
    assert error_of(response)["code"] == "message_not_found"
    assert orders_bodies(billing) == [b"first"]
    assert not AuditEntry.objects.exists()


def test_redriving_for_an_unknown_group_is_404(as_operator, letters):
    response = post(as_operator, "/api/v1/groups/nobody-here/dlq/redrive/", {"all": True})

    assert response.status_code == 404
    assert error_of(response)["code"] == "group_not_found"


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"all": False},
        {"all": "yes"},
        {"message_ids": []},
        {"message_ids": "0" * 24},
        {"message_ids": [1]},
        {"message_ids": ["not-an-id"]},
        {"message_ids": ["A" * 24] * (MAX_REDRIVE_IDS + 1)},
        {"message_ids": ["A" * 24], "all": True},
        {"all": True, "topic": "orders"},
    ],
)
def test_bad_redrive_bodies_are_400_and_send_nothing(as_operator, billing, letters, data):
    response = post(as_operator, REDRIVE, data)

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
    assert orders_bodies(billing) == [b"first"]
