"""Scoped roles (issue 32, item 8): a role's rules on topic and group name patterns decide
what its users see in lists and may do on pages, in the API and on the command line; an
admin edits rules and members on /accounts/roles/ and through the API, audited."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from console.accounts.models import RoleRule
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(store):
    for name in ("payments.in", "payments.out", "shipping"):
        store.create_topic(name, 1)
        store.append(name, b'{"amount": 3}', queue=0)
    store.commit_offset("payments-app", "payments.in", 0, 1)
    store.commit_offset("shipping-app", "shipping", 0, 0)
    return store


def scoped_user(django_user_model, name: str, rules: list[tuple[str, str, list[str]]]):
    role = Group.objects.create(name=f"team-{name}")
    for kind, pattern, actions in rules:
        RoleRule.objects.create(role=role, kind=kind, pattern=pattern, actions=actions)
    user = django_user_model.objects.create_user(username=name, password=None)
    user.groups.add(role)
    return user


@pytest.fixture
def payments(django_user_model):
    return scoped_user(
        django_user_model,
        "pat",
        [
            ("topic", "payments.*", ["view", "read", "produce"]),
            ("group", "payments-*", ["view", "reset"]),
        ],
    )


def as_page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def as_api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_topics_page_lists_only_the_topics_the_role_may_view(shop, payments):
    response = as_page(payments).get("/topics/")

    assert [row.name for row in response.context["page"]] == ["payments.in", "payments.out"]


def test_the_topics_api_lists_only_the_topics_the_role_may_view(shop, payments):
    results = as_api(payments).get("/api/v1/topics/").json()["results"]

    assert [row["name"] for row in results] == ["payments.in", "payments.out"]


def test_the_groups_page_and_api_list_only_the_groups_the_role_may_view(shop, payments):
    page = as_page(payments).get("/groups/")
    api = as_api(payments).get("/api/v1/groups/").json()["results"]

    assert [row.group for row in page.context["page"]] == ["payments-app"]
    assert [row["group"] for row in api] == ["payments-app"]


def test_the_dashboard_lists_only_the_groups_the_role_may_view(shop, payments):
    response = as_page(payments).get("/")

    assert [group.group for group, _ in response.context["behind"]] == ["payments-app"]


def test_a_topic_outside_the_rules_is_403_on_its_page_and_in_the_api(shop, payments):
    assert as_page(payments).get("/topics/shipping/").status_code == 403
    assert as_api(payments).get("/api/v1/topics/shipping/").status_code == 403


def test_the_403_page_says_which_rule_is_missing(shop, payments):
    response = as_page(payments).get("/topics/shipping/")

    assert "do not allow you to view the topic &#x27;shipping&#x27;" in response.content.decode()


def test_a_message_of_another_topic_is_refused_by_id(shop, payments):
    other = shop.append("shipping", b"secret", queue=0)

    page = as_page(payments).get(f"/messages/{other.message_id}/")
    api = as_api(payments).get(f"/api/v1/messages/{other.message_id}/")
    search = as_page(payments).get("/messages/", {"mode": "id", "id": other.message_id})

    assert (page.status_code, api.status_code, search.status_code) == (403, 403, 403)
    assert b"secret" not in page.content + api.content + search.content


def test_a_message_of_an_allowed_topic_is_shown_by_id(shop, payments):
    mine = shop.append("payments.in", b"mine", queue=0)

    assert as_page(payments).get(f"/messages/{mine.message_id}/").status_code == 200


def test_produce_is_allowed_on_the_matching_topics_only(shop, payments):
    client = as_api(payments)
    sent = client.post("/api/v1/topics/payments.out/messages/", {"body": "x"}, format="json")
    refused = client.post("/api/v1/topics/shipping/messages/", {"body": "x"}, format="json")

    assert sent.status_code == 201
    assert refused.status_code == 403
    assert "produce the topic 'shipping'" in refused.json()["error"]["message"]


def test_the_send_form_shows_on_a_topic_the_role_may_produce_to(shop, payments):
    body = as_page(payments).get("/topics/payments.in/").content.decode()

    assert 'name="action" value="send"' in body
    assert 'value="delete"' not in body  # manage is not among the rules


def test_a_topic_is_created_only_under_a_name_the_rules_let_the_role_manage(
    store, django_user_model
):
    maker = scoped_user(django_user_model, "mo", [("topic", "team-a.*", ["view", "manage"])])
    client = as_api(maker)

    made = client.post("/api/v1/topics/", {"name": "team-a.events", "queues": 1}, format="json")
    refused = client.post("/api/v1/topics/", {"name": "team-b.events", "queues": 1}, format="json")

    assert made.status_code == 201
    assert refused.status_code == 403
    assert [t.name for t in store.topics()] == ["team-a.events"]


def test_a_group_of_a_topic_named_by_its_dlq_is_readable_through_the_group_rule(
    store, django_user_model
):
    store.create_topic("%DLQ%payments-app", 1)
    reader = scoped_user(django_user_model, "rita", [("group", "payments-*", ["view", "read"])])

    response = as_page(reader).get("/topics/%25DLQ%25payments-app/")

    assert response.status_code == 200


def test_the_built_in_roles_keep_their_powers(shop, as_viewer, as_operator):
    assert as_viewer.get("/topics/shipping/").status_code == 200
    assert as_operator.post(
        "/topics/shipping/", {"action": "send", "body": "x", "encoding": "text"}
    ).status_code in (200, 302)


# ------------------------------------------------------------------ editing rules


def test_an_admin_adds_a_rule_and_a_member_on_the_roles_page_audited(as_admin, django_user_model):
    django_user_model.objects.create_user(username="sam", password=None)

    as_admin.post(
        "/accounts/roles/",
        {
            "action": "add_rule",
            "role": "team-ops",
            "kind": "group",
            "pattern": "ops-*",
            "actions": ["view", "reset"],
        },
    )
    as_admin.post(
        "/accounts/roles/", {"action": "add_member", "role": "team-ops", "username": "sam"}
    )

    rule = RoleRule.objects.get()
    assert (rule.role.name, rule.kind, rule.pattern, rule.actions) == (
        "team-ops",
        "group",
        "ops-*",
        ["view", "reset"],
    )
    assert django_user_model.objects.get(username="sam").groups.filter(name="team-ops").exists()
    assert list(AuditEntry.objects.order_by("pk").values_list("action", flat=True)) == [
        "role.rule_add",
        "role.member_add",
    ]
    page = as_admin.get("/accounts/roles/").content.decode()
    assert "ops-*" in page and "sam" in page


def test_an_unknown_action_in_a_rule_is_refused_with_a_sentence(as_admin):
    response = as_admin.post(
        "/accounts/roles/",
        {"action": "add_rule", "role": "t", "kind": "topic", "pattern": "*", "actions": ["reset"]},
        follow=True,
    )

    assert "On a topic the actions are view, read, produce, manage; not reset." in (
        response.content.decode()
    )
    assert not RoleRule.objects.exists()


def test_the_built_in_roles_rules_cannot_be_changed(as_admin):
    response = as_admin.post(
        "/accounts/roles/",
        {
            "action": "add_rule",
            "role": "viewer",
            "kind": "topic",
            "pattern": "*",
            "actions": ["manage"],
        },
        follow=True,
    )

    assert "viewer is a built-in role" in response.content.decode()
    assert not RoleRule.objects.exists()


def test_rules_are_added_and_deleted_through_the_api_audited(admin, django_user_model):
    client = as_api(admin)
    django_user_model.objects.create_user(username="sam", password=None)

    made = client.post(
        "/api/v1/roles/",
        {"role": "team-x", "kind": "topic", "pattern": "x.*", "actions": ["view"]},
        format="json",
    )
    member = client.post("/api/v1/roles/team-x/members/", {"username": "sam"}, format="json")
    listed = client.get("/api/v1/roles/").json()
    deleted = client.delete(f"/api/v1/roles/rules/{made.json()['id']}/")

    assert (made.status_code, member.status_code, deleted.status_code) == (201, 204, 204)
    team = next(role for role in listed if role["name"] == "team-x")
    assert team["rules"][0]["pattern"] == "x.*" and team["members"] == ["sam"]
    assert next(role for role in listed if role["name"] == "viewer")["preset"] is True
    assert not RoleRule.objects.exists()
    assert list(AuditEntry.objects.order_by("pk").values_list("action", flat=True)) == [
        "role.rule_add",
        "role.member_add",
        "role.rule_delete",
    ]


def test_a_bad_rule_through_the_api_is_a_400_with_a_sentence(admin):
    response = as_api(admin).post(
        "/api/v1/roles/",
        {"role": "team-x", "kind": "queue", "pattern": "*", "actions": ["view"]},
        format="json",
    )

    assert response.status_code == 400
    assert "kind is one of topic, group" in response.json()["error"]["message"]


def test_a_new_rule_applies_to_the_members_next_request(shop, admin, django_user_model):
    user = scoped_user(django_user_model, "nia", [("topic", "nothing", ["view"])])
    client = as_page(user)
    assert client.get("/topics/shipping/").status_code == 403

    as_api(admin).post(
        "/api/v1/roles/",
        {"role": "team-nia", "kind": "topic", "pattern": "ship*", "actions": ["view"]},
        format="json",
    )

    assert client.get("/topics/shipping/").status_code == 200


def test_a_topic_page_shows_no_message_to_a_role_that_may_view_but_not_read(
    shop, django_user_model
):
    shop.append("shipping", b"the-secret-address", queue=0)
    looker = scoped_user(django_user_model, "lou", [("topic", "shipping", ["view"])])

    response = as_page(looker).get("/topics/shipping/")

    assert response.status_code == 200
    assert b"the-secret-address" not in response.content
    assert "do not allow reading this topic" in response.content.decode()


def test_the_audit_log_shows_a_scoped_role_only_its_topics_groups_and_own_rows(
    shop, payments, admin
):
    from console.audit.log import record

    record(admin, "topic.create", "topic payments.in")
    record(admin, "offset.reset", "group payments-app topic payments.in")
    record(admin, "topic.create", "topic shipping")
    record(admin, "user.create", "user zed")
    record(payments, "message.send", "topic payments.out")

    page = as_page(payments).get("/audit/")
    api = as_api(payments).get("/api/v1/audit/").json()["results"]

    expected = {"topic payments.in", "group payments-app topic payments.in", "topic payments.out"}
    assert {entry.target for entry in page.context["page"]} == expected
    assert {entry["target"] for entry in api} == expected


# Store-wide totals and the alerts: a scoped role sees those of the topics and groups it may
# view (the store's health, such as disk use and store-wide alerts, stays whole).


def test_the_dashboard_totals_count_only_the_topics_the_role_may_view(shop, payments):
    response = as_page(payments).get("/")

    totals = [response.context[name] for name in ("topics", "queues", "message_count")]
    assert totals == [2, 2, 2]


def write_retention_report(store) -> None:
    """A last retention report that dropped messages of a payments and a shipping queue."""
    import json

    rows = [
        {"topic": topic, "queue": 0, "dropped": 1, "unconsumed_by_group": {group: 1}}
        for topic, group in (("payments.in", "payments-app"), ("shipping", "shipping-app"))
    ]
    report = {"now_ms": 1, "deleted_segments": [], "freed_bytes": 0, "queues": rows}
    (store.path / "retention.json").write_text(json.dumps(report))


def test_the_storage_page_and_api_show_only_the_retention_rows_the_role_may_view(shop, payments):
    write_retention_report(shop)

    page = as_page(payments).get("/storage/").context["retention"]
    api = as_api(payments).get("/api/v1/storage/").json()["last_retention"]

    assert [row["topic"] for row in page["queues"]] == ["payments.in"]
    assert [row["unconsumed_by_group"] for row in api["queues"]] == [{"payments-app": 1}]


def test_the_storage_page_shows_every_retention_row_to_a_viewer(shop, as_viewer):
    write_retention_report(shop)

    page = as_viewer.get("/storage/").context["retention"]

    assert [row["topic"] for row in page["queues"]] == ["payments.in", "shipping"]


@pytest.fixture
def alerts_of_both_teams(shop):
    from django.utils import timezone

    from console.alerts.models import AlertEvent, AlertRule

    def rule(name, kind=AlertRule.LAG_MESSAGES, **fields):
        return AlertRule.objects.create(name=name, kind=kind, threshold=0.5, **fields)

    every = rule("every group")
    rule("payments lag", scope=AlertRule.SCOPE_MATCH, group_pattern="payments-.*")
    rule("shipping lag", scope=AlertRule.SCOPE_MATCH, group_pattern="shipping-.*")
    rule("shipping topics", scope=AlertRule.SCOPE_MATCH, topic_pattern="ship.*")
    disk = rule("disk", kind=AlertRule.DISK_RATIO)
    now = timezone.now()
    for subject, source in (("payments-app", every), ("shipping-app", every), ("store", disk)):
        AlertEvent.objects.create(
            rule=source,
            rule_name=source.name,
            kind=source.kind,
            subject=subject,
            state=AlertEvent.FIRING,
            since=now,
            started_at=now,
        )


def test_the_alerts_page_and_api_show_only_the_events_the_role_may_view(
    alerts_of_both_teams, payments
):
    page = as_page(payments).get("/alerts/").context["firing_rows"]
    api = as_api(payments).get("/api/v1/alerts/events/").json()["results"]

    assert sorted(row["event"].subject for row in page) == ["payments-app", "store"]
    assert sorted(event["subject"] for event in api) == ["payments-app", "store"]


def test_the_alerts_page_and_api_show_only_the_rules_the_role_may_view(
    alerts_of_both_teams, payments
):
    page = as_page(payments).get("/alerts/").context["rules"]
    api = as_api(payments).get("/api/v1/alerts/rules/").json()["results"]

    expected = ["disk", "every group", "payments lag"]
    assert sorted(rule.name for rule in page) == expected
    assert sorted(rule["name"] for rule in api) == expected


def test_a_rule_the_role_may_not_view_is_a_404_in_the_api(alerts_of_both_teams, payments):
    from console.alerts.models import AlertRule

    hidden = AlertRule.objects.get(name="shipping lag")

    assert as_api(payments).get(f"/api/v1/alerts/rules/{hidden.pk}/").status_code == 404


def test_the_alerts_page_shows_every_rule_and_event_to_a_viewer(alerts_of_both_teams, as_viewer):
    response = as_viewer.get("/alerts/")

    assert len(response.context["rules"]) == 5
    assert len(response.context["firing_rows"]) == 3


def test_the_store_wide_chart_is_not_drawn_nor_served_to_a_scoped_role(shop, payments):
    client = as_page(payments)

    home = client.get("/").content.decode()
    chart = client.get("/monitoring/charts/dashboard/")

    assert "/monitoring/charts/dashboard/" not in home
    assert chart.status_code == 403
    assert "topic and group pages" in chart.json()["error"]


def test_the_store_wide_chart_is_drawn_for_a_viewer(shop, as_viewer):
    assert "/monitoring/charts/dashboard/" in as_viewer.get("/").content.decode()
    assert as_viewer.get("/monitoring/charts/dashboard/").status_code == 200


def test_the_alerts_page_and_api_show_only_the_silences_the_role_may_view(shop, payments):
    from datetime import timedelta

    from django.utils import timezone

    from console.alerts.models import Silence

    now = timezone.now()
    for pattern in ("payments-.*", "shipping-.*", ""):
        Silence.objects.create(
            subject_pattern=pattern, starts_at=now, ends_at=now + timedelta(hours=1), reason="x"
        )

    page = as_page(payments).get("/alerts/").context["silences"]
    api = as_api(payments).get("/api/v1/alerts/silences/").json()["results"]

    assert sorted(s.subject_pattern for s in page) == ["", "payments-.*"]
    assert sorted(s["subject_pattern"] for s in api) == ["", "payments-.*"]
