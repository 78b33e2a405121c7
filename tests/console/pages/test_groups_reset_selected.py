"""/groups/selected/reset/: resetting the groups selected on the group list to one target:
one form, one preview for all of them, applied as one reset per group (each in its group's
Resets list with its own undo, each audited); each group checked against the user's roles
(a request naming one they may not reset is refused whole, naming it)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry
from console.groups.models import AppliedReset
from tests.console.resetpages import text
from tests.worlds import billing_on_orders

pytestmark = pytest.mark.django_db

URL = "/groups/selected/reset/"


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


def tokens(response) -> list[str]:
    return re.findall(r'name="tokens" value="([^"]+)"', response.content.decode())


def preview(client, groups=("billing", "audit"), mode="earliest", **extra):
    data = {"groups": list(groups), "step": "preview", "topic": "orders", "mode": mode}
    data.update(extra)
    return client.post(URL, data)


def test_the_list_offers_a_checkbox_per_group_to_an_operator(as_operator, groups):
    response = as_operator.get("/groups/")

    assert response.content.count(b'name="groups"') == 3
    assert b"Reset selected" in response.content


def test_the_list_offers_none_to_a_viewer(as_viewer, groups):
    assert b'name="groups"' not in as_viewer.get("/groups/").content


def test_selecting_shows_one_form_with_the_topics_they_all_consume(as_operator, groups):
    response = as_operator.post(URL, {"groups": ["billing", "audit"]})

    assert response.status_code == 200
    assert [c[0] for c in response.context["form"].fields["topic"].choices] == ["orders"]


def test_groups_without_a_topic_in_common_are_told_so(as_operator, groups):
    response = as_operator.post(URL, {"groups": ["billing", "ship"]}, follow=True)

    assert "no topic in common" in text(response)


def test_one_preview_covers_every_group_and_changes_nothing(as_operator, groups):
    response = preview(as_operator)

    assert response.status_code == 200
    page = text(response)
    assert "billing" in page and "audit" in page
    assert len(tokens(response)) == 2
    assert offsets(groups, "billing") == [3, 4]
    assert offsets(groups, "audit") == [1, 2]


def test_applying_makes_one_reset_per_group_each_undoable_and_audited(as_operator, groups):
    shown = preview(as_operator)

    response = as_operator.post(URL, {"step": "apply", "tokens": tokens(shown)}, follow=True)

    assert offsets(groups, "billing") == [0, 0]
    assert offsets(groups, "audit") == [0, 0]
    resets = AppliedReset.objects.order_by("group")
    assert [(r.group, r.mode) for r in resets] == [("audit", "earliest"), ("billing", "earliest")]
    rows = AuditEntry.objects.filter(action="offset.reset").order_by("target")
    assert [r.target for r in rows] == ["group audit topic orders", "group billing topic orders"]
    page = text(response)
    for reset in resets:
        assert f"/groups/{reset.group}/resets/{reset.pk}/undo/" in page


def test_the_undo_of_one_group_leaves_the_other(as_operator, groups):
    as_operator.post(URL, {"step": "apply", "tokens": tokens(preview(as_operator))})
    reset = AppliedReset.objects.get(group="billing")

    undo = as_operator.get(f"/groups/billing/resets/{reset.pk}/undo/")
    token = re.search(r'name="token" value="([^"]+)"', undo.content.decode())[1]
    as_operator.post("/groups/billing/reset/apply/", {"token": token})

    assert offsets(groups, "billing") == [3, 4]
    assert offsets(groups, "audit") == [0, 0]


def test_a_mode_with_a_value_is_previewed_for_each_group(as_operator, groups):
    response = preview(as_operator, mode="shift", shift="-1")

    as_operator.post(URL, {"step": "apply", "tokens": tokens(response)})
    assert offsets(groups, "billing") == [2, 3]
    assert offsets(groups, "audit") == [0, 1]


def test_a_missing_value_shows_the_form_with_its_error(as_operator, groups):
    response = preview(as_operator, mode="shift")

    assert response.status_code == 200
    assert "shift" in response.context["form"].errors
    assert not tokens(response)


def test_nothing_selected_is_said(as_operator, groups):
    response = as_operator.post(URL, {}, follow=True)

    assert "Select at least one group" in text(response)


@pytest.fixture
def team_a(django_user_model) -> Client:
    role = Group.objects.create(name="team-a")
    RoleRule.objects.create(role=role, kind="group", pattern="billing", actions=["view", "reset"])
    RoleRule.objects.create(role=role, kind="group", pattern="audit", actions=["view"])
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    user = django_user_model.objects.create_user(username="ann", password=None)
    user.groups.add(role)
    client = Client()
    client.force_login(user)
    return client


def test_a_scoped_role_gets_checkboxes_only_on_what_it_may_reset(team_a, groups):
    response = team_a.get("/groups/")

    assert response.content.count(b'name="groups"') == 1
    assert b'value="billing"' in response.content


def test_a_scoped_role_naming_a_group_it_may_not_reset_is_refused_whole(team_a, groups):
    response = preview(team_a)

    assert response.status_code == 403
    assert "audit" in response.context["reason"]
    assert "billing" not in response.context["reason"]
    assert offsets(groups, "billing") == [3, 4]


def test_a_scoped_role_may_not_apply_a_preview_of_a_group_it_may_not_reset(
    team_a, as_operator, groups
):
    shown = preview(as_operator)

    response = team_a.post(URL, {"step": "apply", "tokens": tokens(shown)})

    assert response.status_code == 403
    assert offsets(groups, "billing") == [3, 4]
    assert offsets(groups, "audit") == [1, 2]


def test_a_group_named_selected_keeps_its_own_page(as_operator, store):
    store.create_topic("orders", 1)
    store.commit_offset("selected", "orders", 0, 0)

    response = as_operator.get("/groups/selected/")

    assert response.status_code == 200
