"""/api/v1/topics/ and queues: list, create, detail, delete, add, freeze, unfreeze, remove."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")


@pytest.fixture
def orders(store):
    store.create_topic("orders", 2)
    store.append("orders", b"hello", queue=0)
    return store


def post(client, url, data=None):
    return client.post(url, data, format="json")


# Roles


@pytest.mark.parametrize("who", CLIENTS)
def test_reading_topics_needs_viewer(clients, orders, who):
    for url in ("/api/v1/topics/", "/api/v1/topics/orders/", "/api/v1/topics/orders/queues/"):
        assert clients[who].get(url).status_code == expected_status(who, "viewer", 200)


@pytest.mark.parametrize("who", CLIENTS)
def test_creating_a_topic_needs_admin(clients, store, who):
    response = post(clients[who], "/api/v1/topics/", {"name": "new", "queues": 1})

    assert response.status_code == expected_status(who, "admin", 201)
    assert any(t.name == "new" for t in store.topics()) == (who == "admin")


@pytest.mark.parametrize("who", CLIENTS)
def test_deleting_a_topic_needs_admin(clients, orders, who):
    response = clients[who].delete("/api/v1/topics/orders/")

    assert response.status_code == expected_status(who, "admin", 204)
    assert any(t.name == "orders" for t in orders.topics()) == (who != "admin")


@pytest.mark.parametrize("who", CLIENTS)
def test_adding_queues_needs_admin(clients, orders, who):
    response = post(clients[who], "/api/v1/topics/orders/queues/", {"count": 2})

    assert response.status_code == expected_status(who, "admin", 201)
    assert orders.topic("orders").queues == (4 if who == "admin" else 2)


@pytest.mark.parametrize("who", CLIENTS)
def test_freezing_needs_operator(clients, orders, who):
    response = post(clients[who], "/api/v1/topics/orders/queues/1/freeze/")

    assert response.status_code == expected_status(who, "operator", 200)
    assert (1 in orders.topic("orders").frozen) == (who in ("operator", "admin"))


def test_anonymous_gets_401_with_the_token_scheme(anonymous, orders):
    response = anonymous.get("/api/v1/topics/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert error_of(response)["code"] == "not_authenticated"


def test_a_bad_token_is_401(anonymous, orders):
    anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    assert error_of(anonymous.get("/api/v1/topics/"))["code"] == "authentication_failed"


# List


def test_the_list_is_paginated_and_searchable(as_viewer, store):
    for name in ("alpha", "beta", "alphabet"):
        store.create_topic(name, 1)

    body = as_viewer.get("/api/v1/topics/?q=ALPHA&page_size=1").json()

    assert body["count"] == 2
    assert [t["name"] for t in body["results"]] == ["alpha"]
    assert body["next"] is not None


def test_the_list_sorts_by_messages(as_viewer, orders):
    orders.create_topic("empty", 1)

    body = as_viewer.get("/api/v1/topics/?sort=messages").json()

    assert [t["name"] for t in body["results"]] == ["orders", "empty"]
    assert body["results"][0]["messages"] == 1


def test_an_unknown_sort_or_filter_is_400(as_viewer, orders):
    assert error_of(as_viewer.get("/api/v1/topics/?sort=colour"))["code"] == "invalid"
    assert error_of(as_viewer.get("/api/v1/topics/?colour=red"))["code"] == "invalid"


def test_a_page_past_the_end_is_404(as_viewer, orders):
    assert error_of(as_viewer.get("/api/v1/topics/?page=9"))["code"] == "not_found"


# Create and delete


def test_create_answers_the_topic_and_writes_an_audit_row(as_admin, store):
    response = post(as_admin, "/api/v1/topics/", {"name": "payments", "queues": 3})

    assert response.json()["queues"] == 3
    assert len(response.json()["queue_list"]) == 3
    entry = AuditEntry.objects.get(action="topic.create")
    assert (entry.username, entry.after) == (
        "ada",
        {"name": "payments", "queues": 3, "kind": "plain"},
    )


def test_creating_an_existing_topic_is_409(as_admin, orders):
    response = post(as_admin, "/api/v1/topics/", {"name": "orders", "queues": 1})

    assert response.status_code == 409
    assert error_of(response)["code"] == "topic_exists"


@pytest.mark.parametrize(
    "data",
    [
        {"name": "../etc", "queues": 1},
        {"name": "a\x00b", "queues": 1},
        {"name": "x" * 10_000, "queues": 1},
        {"name": "ok", "queues": 0},
        {"name": "ok", "queues": "many"},
        {"name": "ok", "queues": 1, "colour": "red"},
        {"name": 5, "queues": 1},
        {},
    ],
)
def test_bad_topics_are_400_and_create_nothing(as_admin, store, data):
    response = post(as_admin, "/api/v1/topics/", data)

    assert response.status_code == 400
    assert error_of(response)["code"] in ("invalid", "invalid_name")
    assert store.topics() == []
    assert not AuditEntry.objects.exists()


def test_malformed_json_is_400(as_admin, store):
    response = as_admin.post("/api/v1/topics/", "{name:", content_type="application/json")

    assert error_of(response)["code"] == "malformed_request"


def test_deeply_nested_json_is_400(as_admin, store):
    nested = "[" * 50_000 + "]" * 50_000
    response = as_admin.post("/api/v1/topics/", nested, content_type="application/json")

    assert response.status_code == 400


def test_an_oversized_body_is_413(as_admin, store, settings):
    settings.TIDEMARK_API_MAX_BODY_BYTES = 100
    response = post(as_admin, "/api/v1/topics/", {"name": "x" * 200, "queues": 1})

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"


def test_a_form_body_is_415(as_admin, store):
    response = as_admin.post("/api/v1/topics/", {"name": "t", "queues": 1})

    assert response.status_code == 415


def test_an_unknown_topic_is_404(as_viewer, store):
    for url in ("/api/v1/topics/nope/", "/api/v1/topics/nope/queues/"):
        assert error_of(as_viewer.get(url))["code"] == "topic_not_found"


def test_delete_removes_the_topic_and_audits_its_size(as_admin, orders):
    as_admin.delete("/api/v1/topics/orders/")

    entry = AuditEntry.objects.get(action="topic.delete")
    assert entry.before == {"name": "orders", "queues": 2, "messages": 1}


# Queues


def test_one_queue(as_viewer, orders):
    body = as_viewer.get("/api/v1/topics/orders/queues/0/").json()

    assert body == {
        "queue": 0,
        "min_offset": 0,
        "max_offset": 1,
        "messages": 1,
        "frozen": False,
        "last_write_ms": body["last_write_ms"],
    }
    assert body["last_write_ms"] > 0


def test_an_unknown_queue_is_404(as_viewer, orders):
    response = as_viewer.get("/api/v1/topics/orders/queues/7/")

    assert error_of(response)["code"] == "queue_not_found"


def test_a_negative_queue_is_404(as_viewer, orders):
    assert as_viewer.get("/api/v1/topics/orders/queues/-1/").status_code == 404


def test_freeze_then_unfreeze(as_operator, orders):
    frozen = post(as_operator, "/api/v1/topics/orders/queues/1/freeze/").json()
    again = post(as_operator, "/api/v1/topics/orders/queues/1/freeze/").json()
    thawed = post(as_operator, "/api/v1/topics/orders/queues/1/unfreeze/").json()

    assert (frozen["frozen"], frozen["changed"]) == (True, True)
    assert again["changed"] is False
    assert (thawed["frozen"], thawed["changed"]) == (False, True)
    actions = list(AuditEntry.objects.values_list("action", flat=True).order_by("id"))
    assert actions == ["queue.freeze", "queue.unfreeze"]


def test_removing_a_writable_queue_is_refused_with_the_engines_reason(as_admin, orders):
    response = as_admin.delete("/api/v1/topics/orders/queues/1/")

    assert response.status_code == 409
    assert error_of(response)["code"] == "queue_in_use"
    assert orders.topic("orders").queues == 2


def test_removing_a_frozen_last_queue(as_admin, orders):
    post(as_admin, "/api/v1/topics/orders/queues/1/freeze/")

    assert as_admin.delete("/api/v1/topics/orders/queues/1/").status_code == 204
    assert orders.topic("orders").queues == 1


@pytest.mark.parametrize("count", [0, -1, "x", None, 100_000])
def test_adding_a_bad_count_is_400(as_admin, orders, count):
    response = post(as_admin, "/api/v1/topics/orders/queues/", {"count": count})

    assert response.status_code == 400
    assert orders.topic("orders").queues == 2


def test_an_unknown_api_path_is_a_json_404(as_viewer):
    response = as_viewer.get("/api/v1/nothing-here")

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_a_post_without_the_trailing_slash_is_a_json_404_not_a_redirect(as_admin, store):
    response = post(as_admin, "/api/v1/topics", {"name": "t", "queues": 1})

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_a_path_holding_a_newline_is_a_json_404(as_viewer):
    response = as_viewer.get("/api/v1/topics/a%0Ab/x/")

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_a_body_past_djangos_upload_limit_is_413_in_the_error_shape(as_admin, store, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50
    response = post(as_admin, "/api/v1/topics/", {"name": "x" * 100, "queues": 1})

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"


def test_create_with_kind_stream_makes_a_stream_topic(as_admin, store):
    response = post(as_admin, "/api/v1/topics/", {"name": "ledger", "queues": 2, "kind": "stream"})

    assert response.status_code == 201
    assert response.json()["kind"] == "stream"
    assert store.topic("ledger").streams


def test_an_unknown_kind_is_400(as_admin, store):
    response = post(as_admin, "/api/v1/topics/", {"name": "ledger", "queues": 2, "kind": "log"})

    assert response.status_code == 400
    assert store.topics() == []
