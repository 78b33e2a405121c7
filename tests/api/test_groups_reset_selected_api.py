"""POST /api/v1/selected/groups/reset/ (issue 34, item 5): reset several groups to the same
target, as the group list's "Reset selected…" does (its rule: console.groups.bulk_reset):
one preview for all (each group's plan kept under its own token), then apply: one reset,
one undo and one audit row per group; every group checked against the user's roles; the
answer per group (applied, or not with a sentence), never a 500."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry
from console.groups import bulk_reset
from storeadapter.offset_reset import ResetOutdatedError
from tests.api.apitools import error_of, expected_status
from tests.worlds import billing_on_orders

pytestmark = pytest.mark.django_db

URL = "/api/v1/selected/groups/reset/"
CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
EARLIEST = {"groups": ["billing", "audit"], "topic": "orders", "mode": "earliest"}


@pytest.fixture
def groups(store):
    """`billing` (3, 4) and `audit` (1, 2) on `orders`; `ship` on `parcels` only."""
    billing_on_orders(store)
    store.commit_offset("audit", "orders", 0, 1)
    store.commit_offset("audit", "orders", 1, 2)
    store.create_topic("parcels", 1)
    store.commit_offset("ship", "parcels", 0, 0)
    return store


def offsets(store, group: str) -> list:
    return [store.committed_offset(group, "orders", q) for q in (0, 1)]


def preview(client, body=None) -> dict:
    response = client.post(URL, body or EARLIEST, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def apply(client, tokens: list[str]):
    return client.post(URL, {"dry_run": False, "plans": tokens}, format="json")


@pytest.mark.parametrize("client_name", CLIENTS)
def test_resetting_selected_groups_needs_the_operator_role(clients, groups, client_name):
    response = clients[client_name].post(URL, EARLIEST, format="json")

    assert response.status_code == expected_status(client_name, "operator", 200)


def test_one_preview_plans_each_group_under_its_own_token_and_moves_nothing(as_operator, groups):
    body = preview(as_operator)

    assert [p["group"] for p in body["previews"]] == ["billing", "audit"]
    assert len({p["token"] for p in body["previews"]}) == 2
    assert (body["topic"], body["mode"], body["groups"]) == ("orders", "earliest", 2)
    assert body["consumed_again"] == 3 + 4 + 1 + 2
    assert offsets(groups, "billing") == [3, 4] and offsets(groups, "audit") == [1, 2]


def test_applying_makes_one_reset_and_one_undo_per_group(as_operator, groups):
    tokens = [p["token"] for p in preview(as_operator)["previews"]]

    response = apply(as_operator, tokens)

    assert response.status_code == 200
    body = response.json()
    assert (body["applied"], body["failed"]) == (2, 0)
    results = body["results"]
    assert [r["group"] for r in results] == ["billing", "audit"]
    assert all(r["applied"] and r["error"] is None for r in results)
    assert len({r["reset_id"] for r in results}) == 2
    assert results[0]["undo"] == f"/api/v1/groups/billing/resets/{results[0]['reset_id']}/undo/"
    assert offsets(groups, "billing") == [0, 0] and offsets(groups, "audit") == [0, 0]


def test_each_groups_undo_puts_back_only_that_group(as_operator, groups):
    tokens = [p["token"] for p in preview(as_operator)["previews"]]
    undo = apply(as_operator, tokens).json()["results"][1]["undo"]

    token = as_operator.post(undo, {}, format="json").json()["token"]
    as_operator.post(undo, {"dry_run": False, "plan": token}, format="json")

    assert offsets(groups, "audit") == [1, 2] and offsets(groups, "billing") == [0, 0]


def test_each_group_is_audited_on_its_own(as_operator, groups):
    apply(as_operator, [p["token"] for p in preview(as_operator)["previews"]])

    rows = AuditEntry.objects.filter(action="offset.reset").order_by("pk")
    assert [row.target for row in rows] == [
        "group billing topic orders",
        "group audit topic orders",
    ]


def test_a_group_the_user_may_not_reset_refuses_the_preview_whole(groups, django_user_model):
    role = Group.objects.create(name="billing-ops")
    RoleRule.objects.create(role=role, kind="group", pattern="billing", actions=["view", "reset"])
    user = django_user_model.objects.create_user(username="bo", password=None)
    user.groups.add(role)
    client = APIClient()
    client.force_authenticate(user)

    response = client.post(URL, EARLIEST, format="json")

    assert response.status_code == 403
    assert "audit" in error_of(response)["message"]


def test_a_group_without_offsets_on_the_topic_refuses_the_preview(as_operator, groups):
    response = as_operator.post(URL, {**EARLIEST, "groups": ["billing", "ship"]}, format="json")

    assert response.status_code == 404
    assert "ship" in error_of(response)["message"]


def test_an_unknown_group_refuses_the_preview(as_operator, groups):
    response = as_operator.post(URL, {**EARLIEST, "groups": ["billing", "nope"]}, format="json")

    assert response.status_code == 404
    assert "nope" in error_of(response)["message"]


def test_a_preview_applied_already_refuses_the_apply_whole(as_operator, groups):
    tokens = [p["token"] for p in preview(as_operator)["previews"]]
    apply(as_operator, tokens[:1])

    response = apply(as_operator, tokens)

    assert response.status_code == 404
    assert tokens[0] in error_of(response)["message"]
    assert offsets(groups, "audit") == [1, 2]


def test_a_group_whose_reset_is_refused_says_why_and_the_others_are_applied(
    as_operator, groups, monkeypatch
):
    tokens = [p["token"] for p in preview(as_operator)["previews"]]
    real = bulk_reset.operations.apply_kept_preview

    def refusing(user, group, token, undoing=None):
        if group == "billing":
            raise ResetOutdatedError("queue 0 moved since the preview")
        return real(user, group, token, undoing)

    monkeypatch.setattr(bulk_reset.operations, "apply_kept_preview", refusing)

    body = apply(as_operator, tokens).json()

    assert (body["applied"], body["failed"]) == (1, 1)
    assert body["results"][0]["applied"] is False and body["results"][0]["reset_id"] is None
    assert "queue 0 moved since the preview" in body["results"][0]["error"]
    assert offsets(groups, "audit") == [0, 0] and offsets(groups, "billing") == [3, 4]


def test_a_preview_to_an_offset_takes_the_modes_value(as_operator, groups):
    body = preview(as_operator, {**EARLIEST, "mode": "offset", "offsets": {"0": 2, "1": 2}})

    assert [p["group"] for p in body["previews"]] == ["billing", "audit"]


@pytest.mark.parametrize(
    "body",
    [
        {**EARLIEST, "groups": []},
        {**EARLIEST, "groups": "billing"},
        {**EARLIEST, "mode": "sideways"},
        {"dry_run": False, "plans": []},
        {"dry_run": False, "plans": ["not-a-token"]},
    ],
)
def test_a_request_that_is_not_one_is_a_400(as_operator, groups, body):
    response = as_operator.post(URL, body, format="json")

    assert response.status_code == 400
    assert error_of(response)["message"]
