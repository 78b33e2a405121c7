"""/api/v1/alerts/: rules (admin), events, silences (operator) and the test email (admin).

Validation is the console's forms', and every change writes the audit row the /alerts/ pages
write (tests/alerts/test_pages.py is the page side of the same rules).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from console.alerts.models import AlertEvent, AlertRule, Silence
from console.audit.models import AuditEntry
from tests.alerts.alerttools import evaluate, group, make_rule, make_silence
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
RULES = "/api/v1/alerts/rules/"
EVENTS = "/api/v1/alerts/events/"
SILENCES = "/api/v1/alerts/silences/"
TEST_EMAIL = "/api/v1/alerts/test-email/"

RULE = {
    "name": "orders lag",
    "enabled": True,
    "kind": AlertRule.LAG_MESSAGES,
    "threshold": 1000,
    "scope": AlertRule.SCOPE_MATCH,
    "group_pattern": "orders-.*",
    "topic_pattern": "",
    "for_seconds": 60,
    "repeat_seconds": 3600,
    "recipients": ["ops@example.com", "oncall@example.com"],
}


def rule_url(rule_id) -> str:
    return f"{RULES}{rule_id}/"


def expire_url(silence_id) -> str:
    return f"{SILENCES}{silence_id}/expire/"


def later(hours: float = 2) -> str:
    return (timezone.now() + timedelta(hours=hours)).isoformat()


def rules_state() -> list[dict]:
    return [rule.state() for rule in AlertRule.objects.order_by("pk")]


def silences_state() -> list[tuple]:
    return list(Silence.objects.order_by("pk").values_list("pk", "ends_at", "subject_pattern"))


@pytest.fixture
def rule(db) -> AlertRule:
    return make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")


@pytest.fixture
def silence(db) -> Silence:
    return make_silence(None, "shipping", ends_at=timezone.now() + timedelta(hours=1))


@pytest.fixture
def firing_event(rule) -> AlertEvent:
    """`rule` firing now for group billing."""
    evaluate([group("billing", lag=500)], None, timezone.now())
    return AlertEvent.objects.get()


def page_client(api_client) -> Client:
    """A console (page) client logged in as the API client's user."""
    client = Client()
    client.force_login(api_client.user)
    return client


# ---------------------------------------------------------------------------------- roles

# (method, url, body, role needed, status when allowed)
CHANGES = [
    ("post", RULES, RULE, "admin", 201),
    ("put", "{rule}", RULE, "admin", 200),
    ("patch", "{rule}", {"threshold": 5000}, "admin", 200),
    ("patch", "{rule}", {"enabled": False}, "admin", 200),
    ("delete", "{rule}", None, "admin", 204),
    ("post", SILENCES, {"ends_at": "{later}", "reason": "deploy"}, "operator", 201),
    ("post", "{expire}", None, "operator", 200),
    ("post", TEST_EMAIL, {"recipients": ["a@example.com"]}, "admin", 200),
]


@pytest.mark.parametrize("who", CLIENTS)
@pytest.mark.parametrize("url", [RULES, "{rule}", EVENTS, SILENCES])
def test_reading_needs_viewer(clients, rule, who, url):
    response = clients[who].get(url.format(rule=rule_url(rule.pk)))

    assert response.status_code == expected_status(who, "viewer", 200)
    if response.status_code != 200:
        error_of(response)


@pytest.mark.parametrize("who", CLIENTS)
@pytest.mark.parametrize(
    "method, url, body, role, allowed", CHANGES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CHANGES]
)
def test_each_change_needs_its_role(
    clients, rule, silence, mailoutbox, who, method, url, body, role, allowed
):
    url = url.format(rule=rule_url(rule.pk), expire=expire_url(silence.pk))
    if body is not None:
        body = {k: (later() if v == "{later}" else v) for k, v in body.items()}
    rules, silences = rules_state(), silences_state()

    response = getattr(clients[who], method)(url, body, format="json")

    assert response.status_code == expected_status(who, role, allowed), response.content
    if response.status_code == allowed:
        assert AuditEntry.objects.filter(username=clients[who].user.username).count() == 1
    else:
        assert error_of(response)["code"] in ("not_authenticated", "permission_denied")
        assert (rules_state(), silences_state()) == (rules, silences)
        assert not AuditEntry.objects.exists()
        assert mailoutbox == []


def test_rules_events_and_silences_are_not_deletable_as_lists(as_admin):
    for url in (RULES, EVENTS, SILENCES, TEST_EMAIL):
        response = as_admin.delete(url)
        assert response.status_code == 405
        assert error_of(response)["code"] == "method_not_allowed"


# ---------------------------------------------------------------------------------- rules


def test_admin_creates_a_rule_audited_as_the_page_does(as_admin):
    response = as_admin.post(RULES, RULE, format="json")

    assert response.status_code == 201
    body = response.json()
    rule = AlertRule.objects.get()
    assert body["id"] == rule.pk
    assert {k: body[k] for k in RULE} == RULE
    assert (body["condition"], body["applies_to"]) == ("lag > 1000 messages", "groups /orders-.*/")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.target) == (
        "alert.rule.create",
        "ada",
        "alert rule orders lag",
    )
    assert (entry.before, entry.after, entry.link) == (None, rule.state(), "/alerts/#rules")

    # The page's create of the same rule writes the same row.
    page_rule = {**RULE, "name": "page lag", "recipients": "\n".join(RULE["recipients"])}
    page_rule["enabled"] = "on"
    assert page_client(as_admin).post("/alerts/rules/new/", page_rule).status_code == 302
    page_entry = AuditEntry.objects.latest("id")
    assert page_entry.action == entry.action
    assert {**page_entry.after, "name": "orders lag"} == entry.after


def test_omitted_fields_take_the_forms_defaults(as_admin):
    response = as_admin.post(
        RULES, {"name": "any lag", "kind": "lag_seconds", "threshold": 30}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["enabled"], body["scope"], body["for_seconds"], body["repeat_seconds"]) == (
        True,
        "all",
        0,
        3600,
    )
    assert (body["recipients"], body["group_pattern"]) == ([], "")


def test_an_omitted_for_takes_two_sample_intervals_on_a_status_rule(as_admin, settings):
    settings.TIDEMARK_SAMPLE_INTERVAL_S = 10
    body = {"name": "groups in error", "kind": AlertRule.STATUS_ERR}

    response = as_admin.post(RULES, body, format="json")

    assert response.status_code == 201
    assert response.json()["for_seconds"] == 20


def test_a_given_for_is_kept_on_a_status_rule(as_admin):
    body = {"name": "groups in error", "kind": AlertRule.STATUS_ERR, "for_seconds": 0}

    response = as_admin.post(RULES, body, format="json")

    assert response.json()["for_seconds"] == 0


def test_a_status_rule_drops_its_threshold(as_admin):
    body = {**RULE, "kind": AlertRule.STATUS_ERR, "threshold": 7}

    response = as_admin.post(RULES, body, format="json")

    assert response.status_code == 201
    assert response.json()["threshold"] is None
    assert AlertRule.objects.get().threshold is None


def test_a_disk_rule_takes_a_ratio(as_admin):
    body = {**RULE, "kind": "disk_ratio", "threshold": 0.85, "scope": "all", "group_pattern": ""}

    response = as_admin.post(RULES, body, format="json")

    assert response.status_code == 201
    assert (response.json()["threshold"], response.json()["applies_to"]) == (0.85, "the store")


def test_recipients_are_cleaned_as_the_form_does(as_admin):
    body = {**RULE, "recipients": ["ops@example.com", "OPS@example.com", "b@example.com"]}

    response = as_admin.post(RULES, body, format="json")

    assert response.json()["recipients"] == ["ops@example.com", "b@example.com"]


def test_a_recipient_holding_two_addresses_is_refused_naming_the_field(as_admin):
    body = {**RULE, "recipients": ["ops@example.com, b@example.com"]}

    response = as_admin.post(RULES, body, format="json")

    assert response.status_code == 400
    assert "one email address" in response.json()["error"]["message"]
    assert list(response.json()["error"]["details"]["fields"]) == ["recipients"]


def test_rules_are_listed_by_name_and_paged(as_viewer):
    for name in ("c", "a", "b"):
        make_rule(AlertRule.LAG_MESSAGES, 100, name=name)

    everything = as_viewer.get(RULES).json()
    first = as_viewer.get(RULES + "?page_size=2").json()

    assert everything["count"] == 3
    assert [r["name"] for r in everything["results"]] == ["a", "b", "c"]
    assert [r["name"] for r in first["results"]] == ["a", "b"]
    assert first["next"] is not None


def test_a_rule_is_read_by_id(as_viewer, rule):
    body = as_viewer.get(rule_url(rule.pk)).json()

    assert (body["id"], body["name"], body["threshold"]) == (rule.pk, "billing lag", 100)
    assert body["recipients"] == ["ops@example.com"]


def test_put_replaces_the_rule_and_audits_before_and_after(as_admin, rule):
    before = rule.state()

    response = as_admin.put(
        rule_url(rule.pk),
        {"name": "billing lag", "kind": "lag_messages", "threshold": 5000},
        format="json",
    )

    assert response.status_code == 200
    rule.refresh_from_db()
    assert (rule.threshold, rule.recipients, rule.for_seconds) == (5000, "", 0)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target) == ("alert.rule.update", "alert rule billing lag")
    assert (entry.before, entry.after) == (before, rule.state())
    assert response.json()["threshold"] == 5000


def test_patch_changes_only_the_fields_sent(as_admin, rule):
    response = as_admin.patch(
        rule_url(rule.pk), {"threshold": 250, "recipients": ["x@example.com"]}, format="json"
    )

    assert response.status_code == 200
    rule.refresh_from_db()
    assert (rule.name, rule.kind, rule.threshold) == ("billing lag", "lag_messages", 250)
    assert rule.recipient_list() == ["x@example.com"]
    entry = AuditEntry.objects.get(action="alert.rule.update")
    assert (entry.before["threshold"], entry.after["threshold"]) == (100, 250)
    assert entry.after["recipients"] == ["x@example.com"]


def test_a_patch_that_changes_nothing_is_not_audited(as_admin, rule):
    response = as_admin.patch(rule_url(rule.pk), {"threshold": 100}, format="json")

    assert response.status_code == 200
    assert not AuditEntry.objects.exists()


def test_patching_enabled_alone_is_the_pages_disable_and_enable(as_admin, rule):
    off = as_admin.patch(rule_url(rule.pk), {"enabled": False}, format="json")
    again = as_admin.patch(rule_url(rule.pk), {"enabled": False}, format="json")
    on = as_admin.patch(rule_url(rule.pk), {"enabled": True}, format="json")

    assert [r.status_code for r in (off, again, on)] == [200, 200, 200]
    assert (off.json()["enabled"], again.json()["enabled"], on.json()["enabled"]) == (
        False,
        False,
        True,
    )
    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == ["alert.rule.disable", "alert.rule.enable"]
    assert (entries[0].before["enabled"], entries[0].after["enabled"]) == (True, False)


def test_delete_keeps_the_history_and_resolves_what_fires(as_admin, firing_event):
    rule = firing_event.rule

    response = as_admin.delete(rule_url(rule.pk))

    assert response.status_code == 204
    assert not AlertRule.objects.exists()
    firing_event.refresh_from_db()
    assert (firing_event.rule_id, firing_event.state) == (None, AlertEvent.RESOLVED)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target) == ("alert.rule.delete", "alert rule billing lag")
    assert (entry.before, entry.after) == (rule.state(), None)


def test_a_taken_name_is_409_and_creates_nothing(as_admin, rule):
    response = as_admin.post(RULES, {**RULE, "name": "billing lag"}, format="json")

    assert response.status_code == 409
    assert error_of(response)["code"] == "rule_exists"
    assert AlertRule.objects.count() == 1
    assert not AuditEntry.objects.exists()


def test_renaming_to_a_taken_name_is_409(as_admin, rule):
    other = make_rule(AlertRule.LAG_MESSAGES, 100, name="other")

    response = as_admin.patch(rule_url(other.pk), {"name": "billing lag"}, format="json")

    assert response.status_code == 409
    other.refresh_from_db()
    assert other.name == "other"


# The page's table of bad input (tests/alerts/test_pages.py), as JSON, and JSON's own.
BAD_RULES = [
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": 5}, "name"),
    ({"kind": "nonsense"}, "kind"),
    ({"threshold": None}, "threshold"),
    ({"threshold": "1000"}, "threshold"),
    ({"threshold": -5}, "threshold"),
    ({"kind": "disk_ratio", "threshold": 1.5, "scope": "all", "group_pattern": ""}, "threshold"),
    ({"kind": "disk_ratio", "threshold": 0.8}, "scope"),
    ({"kind": "expiry_hours", "threshold": 0}, "threshold"),
    ({"group_pattern": "orders-(["}, "group_pattern"),
    ({"topic_pattern": "*oops"}, "topic_pattern"),
    ({"group_pattern": "a" * 201}, "group_pattern"),
    ({"scope": "match", "group_pattern": ""}, "group_pattern"),
    ({"scope": "all"}, "group_pattern"),
    ({"scope": "everything"}, "scope"),
    ({"for_seconds": -1}, "for_seconds"),
    ({"for_seconds": 999999999}, "for_seconds"),
    ({"for_seconds": "60"}, "for_seconds"),
    ({"for_seconds": 1.5}, "for_seconds"),
    ({"repeat_seconds": 5}, "repeat_seconds"),
    ({"enabled": "yes"}, "enabled"),
    ({"recipients": ["ops@example.com", "not-an-address"]}, "recipients"),
    ({"recipients": [f"u{n}@example.com" for n in range(51)]}, "recipients"),
    ({"recipients": "ops@example.com"}, "recipients"),
    ({"recipients": [5]}, "recipients"),
    ({"colour": "red"}, "colour"),
]


def _bad_body(change: dict) -> dict:
    return {**RULE, **change}


@pytest.mark.parametrize("change, field", BAD_RULES)
def test_bad_rule_input_is_400_and_creates_nothing(as_admin, change, field):
    response = as_admin.post(RULES, _bad_body(change), format="json")

    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"], error
    assert not AlertRule.objects.exists()
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("threshold", ["1e999", "-1e999", "NaN", "Infinity"])
def test_a_threshold_that_is_not_finite_is_400(as_admin, threshold):
    body = f'{{"name": "x", "kind": "lag_messages", "threshold": {threshold}}}'

    response = as_admin.post(RULES, body.encode(), content_type="application/json")

    assert response.status_code == 400, response.content
    error_of(response)
    assert not AlertRule.objects.exists()


@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize("change, field", BAD_RULES)
def test_a_bad_change_changes_nothing(as_admin, method, change, field):
    rule = AlertRule.objects.create(**{**RULE, "recipients": "\n".join(RULE["recipients"])})
    before = rule.state()
    body = _bad_body(change) if method == "put" else change

    response = getattr(as_admin, method)(rule_url(rule.pk), body, format="json")

    assert response.status_code == 400, response.content
    assert field in error_of(response)["details"]["fields"]
    rule.refresh_from_db()
    assert rule.state() == before
    assert not AuditEntry.objects.exists()


def test_the_forms_message_is_the_errors_message(as_admin):
    response = as_admin.post(RULES, {**RULE, "group_pattern": "(("}, format="json")

    error = error_of(response)
    assert error["message"].startswith("group_pattern: Not a valid RE2 regular expression")
    assert error["details"]["fields"]["group_pattern"][0]["message"].startswith("Not a valid")


def test_malformed_json_is_400(as_admin):
    response = as_admin.post(RULES, b"{not json", content_type="application/json")

    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_request"


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
@pytest.mark.parametrize("rule_id", ["999999", "9" * 30])
def test_an_unknown_rule_is_404(as_admin, method, rule_id):
    response = getattr(as_admin, method)(rule_url(rule_id), RULE, format="json")

    assert response.status_code == 404
    assert error_of(response)["code"] == "rule_not_found"
    assert not AuditEntry.objects.exists()


def test_a_rule_id_that_is_not_a_number_is_404(as_admin):
    response = as_admin.get(rule_url("abc"))

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


# --------------------------------------------------------------------------------- events


@pytest.fixture
def history(rule):
    """billing: resolved, then firing again; shipping: firing; both for `rule`, and a
    pending one of another rule (a for-duration) for billing."""
    start = timezone.now() - timedelta(hours=1)
    evaluate([group("billing", lag=500)], None, start)
    evaluate([group("billing", lag=0)], None, start + timedelta(minutes=1))
    slow = make_rule(
        AlertRule.LAG_MESSAGES,
        10,
        name="slow lag",
        for_seconds=86400,
        scope=AlertRule.SCOPE_MATCH,
        group_pattern="billing",
    )
    now = timezone.now()
    evaluate([group("billing", lag=500), group("shipping", lag=800)], None, now)
    return {"rule": rule, "slow": slow}


def test_events_are_listed_newest_first_with_the_pages_figures(as_viewer, history):
    body = as_viewer.get(EVENTS).json()

    assert body["count"] == 4
    states = [(e["rule_name"], e["subject"], e["state"]) for e in body["results"]]
    assert sorted(states) == [
        ("billing lag", "billing", "firing"),
        ("billing lag", "billing", "resolved"),
        ("billing lag", "shipping", "firing"),
        ("slow lag", "billing", "pending"),
    ]
    assert states[-1] == ("billing lag", "billing", "resolved")
    shipping = next(e for e in body["results"] if e["subject"] == "shipping")
    assert (shipping["value"], shipping["value_text"]) == (800, "800 messages")
    assert shipping["rule"] == history["rule"].pk
    assert shipping["silenced_by"] is None
    assert parse_datetime(shipping["started_at"]) is not None


@pytest.mark.parametrize(
    "query, expected",
    [
        ("state=firing", {("billing lag", "billing"), ("billing lag", "shipping")}),
        ("state=resolved", {("billing lag", "billing")}),
        ("state=pending", {("slow lag", "billing")}),
        ("subject=shipping", {("billing lag", "shipping")}),
        ("subject=ship", set()),
        ("rule={slow}", {("slow lag", "billing")}),
        ("rule={rule}&state=firing&subject=billing", {("billing lag", "billing")}),
        ("rule=999999", set()),
    ],
)
def test_events_are_filtered(as_viewer, history, query, expected):
    query = query.format(rule=history["rule"].pk, slow=history["slow"].pk)

    body = as_viewer.get(f"{EVENTS}?{query}").json()

    assert {(e["rule_name"], e["subject"]) for e in body["results"]} == expected
    assert body["count"] == len(body["results"])


def test_an_event_subject_longer_than_a_subject_is_refused_even_if_blank(as_viewer):
    from console.api.views.alerts import SUBJECT_LENGTH

    response = as_viewer.get(f"{EVENTS}?subject={'+' * (SUBJECT_LENGTH + 1)}")

    assert response.status_code == 400
    assert "subject" in error_of(response)["details"]["fields"]


def test_events_are_paged(as_viewer, history):
    first = as_viewer.get(f"{EVENTS}?page_size=3").json()
    second = as_viewer.get(f"{EVENTS}?page_size=3&page=2").json()

    assert (len(first["results"]), len(second["results"]), first["count"]) == (3, 1, 4)
    assert as_viewer.get(f"{EVENTS}?page=9").status_code == 404


def test_an_event_shows_the_silence_muting_it(as_viewer, firing_event):
    silence = make_silence(
        firing_event.rule, "billing", ends_at=timezone.now() + timedelta(hours=1)
    )

    (event,) = as_viewer.get(EVENTS).json()["results"]

    assert event["silenced_by"] == silence.pk


@pytest.mark.parametrize(
    "query", ["state=burning", "rule=abc", "rule=0", "subject=" + "x" * 301, "colour=red"]
)
def test_bad_event_filters_are_400(as_viewer, query):
    response = as_viewer.get(f"{EVENTS}?{query}")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"


# ------------------------------------------------------------------------------- silences


def test_operator_silences_a_rule_for_a_subject(as_operator, firing_event):
    body = {
        "rule": firing_event.rule_id,
        "subject_pattern": "billing",
        "ends_at": later(2),
        "reason": "deploying billing",
    }

    response = as_operator.post(SILENCES, body, format="json")

    assert response.status_code == 201
    silence = Silence.objects.get()
    data = response.json()
    assert (data["id"], data["rule"], data["rule_name"]) == (
        silence.pk,
        silence.rule_id,
        "billing lag",
    )
    assert (data["created_by"], data["active"]) == ("otto", True)
    assert data["applies_to"] == "billing lag, /billing/"
    assert silence.created_by == as_operator.user
    assert silence.covers(firing_event.rule_id, "billing", timezone.now())
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.link) == (
        "alert.silence.create",
        "otto",
        "/alerts/#silences",
    )
    assert entry.target == f"silence {silence.pk} (billing lag, /billing/)"
    assert entry.after["reason"] == "deploying billing"
    assert as_operator.get(EVENTS).json()["results"][0]["silenced_by"] == silence.pk


def test_a_silence_of_every_rule(as_operator):
    response = as_operator.post(
        SILENCES, {"rule": None, "ends_at": later(), "reason": "maintenance"}, format="json"
    )

    assert response.status_code == 201
    assert (response.json()["rule"], response.json()["applies_to"]) == (
        None,
        "every rule, every subject",
    )


BAD_SILENCES = [
    ({"ends_at": "2000-01-01T00:00:00Z"}, "ends_at"),
    ({"ends_at": "not a date"}, "ends_at"),
    ({"ends_at": "2026-13-45T99:99"}, "ends_at"),
    ({"ends_at": ""}, "ends_at"),
    ({"ends_at": None}, "ends_at"),
    ({"ends_at": "{91 days}"}, "ends_at"),
    ({"subject_pattern": "billing("}, "subject_pattern"),
    ({"subject_pattern": "x" * 300}, "subject_pattern"),
    ({"reason": "   "}, "reason"),
    ({"reason": ""}, "reason"),
    ({"rule": "abc"}, "rule"),
    ({"rule": "1"}, "rule"),
    ({"colour": "red"}, "colour"),
]


@pytest.mark.parametrize("change, field", BAD_SILENCES)
def test_bad_silence_input_is_400_and_creates_nothing(as_operator, rule, change, field):
    change = {k: (later(24 * 91) if v == "{91 days}" else v) for k, v in change.items()}
    body = {"subject_pattern": "", "ends_at": later(), "reason": "why", **change}

    response = as_operator.post(SILENCES, body, format="json")

    assert response.status_code == 400, response.content
    assert field in error_of(response)["details"]["fields"]
    assert not Silence.objects.exists()
    assert not AuditEntry.objects.exists()


def test_a_silence_of_a_rule_that_does_not_exist_is_404_and_creates_nothing(as_operator, rule):
    body = {"rule": 999999, "ends_at": later(), "reason": "why"}

    response = as_operator.post(SILENCES, body, format="json")

    assert response.status_code == 404, response.content
    assert error_of(response)["code"] == "rule_not_found"
    assert not Silence.objects.exists()


def test_silences_are_listed_with_an_active_filter(as_viewer, rule):
    now = timezone.now()
    active = make_silence(
        rule, "billing", starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1)
    )
    ended = make_silence(
        None, "", starts_at=now - timedelta(hours=3), ends_at=now - timedelta(hours=2)
    )

    everything = as_viewer.get(SILENCES).json()
    current = as_viewer.get(SILENCES + "?active=true").json()
    past = as_viewer.get(SILENCES + "?active=false").json()

    assert [s["id"] for s in everything["results"]] == [active.pk, ended.pk]
    assert [(s["id"], s["active"]) for s in current["results"]] == [(active.pk, True)]
    assert [(s["id"], s["active"]) for s in past["results"]] == [(ended.pk, False)]
    assert as_viewer.get(SILENCES + "?active=maybe").status_code == 400


def test_operator_expires_a_silence_early(as_operator, silence):
    response = as_operator.post(expire_url(silence.pk))

    assert response.status_code == 200
    assert (response.json()["changed"], response.json()["active"]) == (True, False)
    silence.refresh_from_db()
    assert not silence.is_active()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target) == (
        "alert.silence.expire",
        f"silence {silence.pk} (every rule, /shipping/)",
    )
    assert entry.before["ends_at"] != entry.after["ends_at"]


def test_expiring_an_ended_silence_changes_nothing(as_operator):
    ended = timezone.now() - timedelta(hours=1)
    silence = make_silence(None, starts_at=ended - timedelta(hours=1), ends_at=ended)

    response = as_operator.post(expire_url(silence.pk))

    assert response.status_code == 200
    assert response.json()["changed"] is False
    silence.refresh_from_db()
    assert silence.ends_at == ended
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("silence_id", ["999999", "9" * 30])
def test_expiring_an_unknown_silence_is_404(as_operator, silence_id):
    response = as_operator.post(expire_url(silence_id))

    assert response.status_code == 404
    assert error_of(response)["code"] == "silence_not_found"


def test_expire_takes_no_get(as_operator, silence):
    assert as_operator.get(expire_url(silence.pk)).status_code == 405


# ----------------------------------------------------------------------------- test email


def test_admin_sends_a_test_email(as_admin, mailoutbox):
    response = as_admin.post(
        TEST_EMAIL, {"recipients": ["a@example.com", "b@example.com"]}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"recipients": ["a@example.com", "b@example.com"], "sent": True}
    (mail,) = mailoutbox
    assert (mail.to, mail.subject) == (["a@example.com", "b@example.com"], "[Tidemark] Test email")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.target) == ("alert.test_email", "ada", "alert mail")
    assert (entry.after, entry.detail) == (
        {"recipients": ["a@example.com", "b@example.com"]},
        "sent",
    )


@pytest.mark.parametrize(
    "body",
    [
        {"recipients": []},
        {"recipients": ["not-an-address"]},
        {"recipients": ["a@example.com", "bad"]},
        {"recipients": "a@example.com"},
        {"recipients": [1]},
        {},
        {"recipients": ["a@example.com"], "subject": "hi"},
    ],
)
def test_a_test_email_to_bad_addresses_is_400_and_not_sent(as_admin, mailoutbox, body):
    response = as_admin.post(TEST_EMAIL, body, format="json")

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
    assert mailoutbox == []
    assert not AuditEntry.objects.exists()


def test_a_refusing_mail_server_is_a_502_and_the_attempt_is_audited(as_admin, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("no mail server here")

    monkeypatch.setattr("console.alerts.operations.send_mail", refuse)

    response = as_admin.post(TEST_EMAIL, {"recipients": ["a@example.com"]}, format="json")

    assert response.status_code == 502
    error = error_of(response)
    assert error["code"] == "mail_failed"
    assert "no mail server here" in error["message"]
    entry = AuditEntry.objects.get(action="alert.test_email")
    assert entry.detail == "failed: ConnectionRefusedError: no mail server here"


# --------------------------------------------------------------------------------- schema


def test_the_schema_documents_the_alert_resources(as_viewer):
    paths = as_viewer.get("/api/schema/?format=json").json()["paths"]

    assert set(paths["/api/v1/alerts/rules/{rule_id}/"]) == {"get", "put", "patch", "delete"}
    assert set(paths["/api/v1/alerts/rules/"]) == {"get", "post"}
    assert "post" in paths["/api/v1/alerts/silences/{silence_id}/expire/"]
    assert "502" in paths["/api/v1/alerts/test-email/"]["post"]["responses"]
    assert {p["name"] for p in paths["/api/v1/alerts/events/"]["get"]["parameters"]} >= {
        "state",
        "rule",
        "subject",
    }


def test_the_api_refuses_a_back_reference_with_a_400(as_admin):
    response = as_admin.post(
        "/api/v1/alerts/rules/",
        {
            "name": "x",
            "kind": "lag_messages",
            "threshold": 1,
            "scope": "match",
            "group_pattern": r"(a)\1",
        },
        format="json",
    )
    assert response.status_code == 400
    assert "RE2 has no back-references" in response.json()["error"]["message"]
