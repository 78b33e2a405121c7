"""Data masking (issue 32, item 10): a user who may view a topic but not read it sees its
messages with the mask rules applied, in pages, the API, exports and pulls alike; a user
who may read it sees them whole; with no mask rule, no reading at all."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from console.accounts.models import MaskRule, RoleRule

pytestmark = pytest.mark.django_db

CARD = {"card": {"number": "4111-1111", "holder": "Ann"}, "amount": 7}


@pytest.fixture
def cards(store):
    store.create_topic("cards", 1)
    store.create_topic("plain", 1)
    sent = store.append(
        "cards", json.dumps(CARD).encode(), key="ann", queue=0, properties={"ip": "10.0.0.9"}
    )
    store.append("plain", b"not masked anywhere", queue=0)
    MaskRule.objects.create(pattern="card*", part="body", field="card.number", how="mask")
    MaskRule.objects.create(pattern="card*", part="property", field="ip", how="remove")
    MaskRule.objects.create(pattern="card*", part="key", field="*", how="mask")
    return sent


@pytest.fixture
def looker(django_user_model):
    role = Group.objects.create(name="team-support")
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    user = django_user_model.objects.create_user(username="sue", password=None)
    user.groups.add(role)
    return user


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_api_shows_a_viewer_only_user_the_message_masked(cards, looker):
    record = api(looker).get(f"/api/v1/messages/{cards.message_id}/").json()

    assert json.loads(record["body"]) == {"card": {"number": "****", "holder": "Ann"}, "amount": 7}
    assert record["properties"] == {}
    assert record["keys"] == ["****"]


def test_the_message_page_shows_it_masked(cards, looker):
    response = page(looker).get(f"/messages/{cards.message_id}/")

    assert response.status_code == 200
    assert b"4111-1111" not in response.content
    assert b"10.0.0.9" not in response.content


def test_a_search_and_a_pull_show_it_masked(cards, looker):
    client = api(looker)
    found = client.get("/api/v1/messages/", {"topic": "cards", "queue": 0}).json()
    pulled = client.get("/api/v1/topics/cards/queues/0/messages/", {"group": "g"}).json()

    bodies = [m["body"] for m in found["results"] + pulled["messages"]]
    assert len(bodies) == 2
    assert all("4111-1111" not in body and "****" in body for body in bodies)


def test_an_export_shows_it_masked(cards, looker):
    response = api(looker).get("/api/v1/messages/export/", {"topic": "cards", "queue": 0})

    content = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200
    assert b"4111-1111" not in content and b"****" in content


def test_a_topic_without_mask_rules_is_not_readable_by_a_viewer_only_user(cards, looker):
    response = api(looker).get("/api/v1/messages/", {"topic": "plain", "queue": 0})

    assert response.status_code == 403


def test_a_user_who_may_read_the_topic_sees_it_whole(cards, viewer):
    record = api(viewer).get(f"/api/v1/messages/{cards.message_id}/").json()

    assert json.loads(record["body"]) == CARD
    assert record["properties"] == {"ip": "10.0.0.9"}


def test_a_whole_body_rule_hides_a_body_that_is_no_json(store, looker):
    store.create_topic("cardlog", 1)
    sent = store.append("cardlog", b"free text 4111", queue=0)
    MaskRule.objects.create(pattern="cardlog", part="body", field="*", how="mask")

    record = api(looker).get(f"/api/v1/messages/{sent.message_id}/").json()

    assert record["body"] == "****"


def test_an_admin_adds_and_deletes_a_mask_rule_on_the_roles_page_audited(as_admin):
    from console.audit.models import AuditEntry

    as_admin.post(
        "/accounts/roles/",
        {"action": "add_mask", "pattern": "cards", "part": "body", "field": "pan", "how": "remove"},
    )
    rule = MaskRule.objects.get()
    as_admin.post("/accounts/roles/", {"action": "delete_mask", "mask": str(rule.pk)})

    assert (rule.pattern, rule.part, rule.field, rule.how) == ("cards", "body", "pan", "remove")
    assert not MaskRule.objects.exists()
    assert list(AuditEntry.objects.order_by("pk").values_list("action", flat=True)) == [
        "mask.add",
        "mask.delete",
    ]


def test_mask_rules_are_added_through_the_api_and_a_bad_part_is_a_400(admin):
    client = api(admin)

    made = client.post(
        "/api/v1/masks/", {"pattern": "cards", "part": "property", "field": "ip"}, format="json"
    )
    bad = client.post("/api/v1/masks/", {"pattern": "cards", "part": "header"}, format="json")

    assert made.status_code == 201 and made.json()["how"] == "mask"
    assert bad.status_code == 400
    assert "part is one of body, property, key" in bad.json()["error"]["message"]
    assert [m["field"] for m in client.get("/api/v1/masks/").json()] == ["ip"]


def test_a_redrive_or_produce_is_never_masked(cards, looker, store):
    """Changes get the store itself: only read-only requests are masked."""
    from console.accounts.masking import MaskingStore, current_request
    from console.core.store import get_store

    class Post:
        method = "POST"
        user = looker

    class Get(Post):
        method = "GET"

    token = current_request.set(Post())
    try:
        assert not isinstance(get_store(), MaskingStore)
    finally:
        current_request.reset(token)
    token = current_request.set(Get())
    try:
        assert isinstance(get_store(), MaskingStore)
    finally:
        current_request.reset(token)
