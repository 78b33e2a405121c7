"""/alerts/ per role: who sees what, who may change what, form errors and audit rows."""

import html
from datetime import timedelta

import pytest
from django.utils import timezone

from console.alerts.models import AlertEvent, AlertRule, Silence
from console.audit.models import AuditEntry
from tests.alerts.alerttools import evaluate, group, make_rule, make_silence

pytestmark = pytest.mark.django_db

INDEX = "/alerts/"
NEW_RULE = "/alerts/rules/new/"
NEW_SILENCE = "/alerts/silences/new/"
TEST_EMAIL = "/alerts/test-email/"

RULE_POST = {
    "name": "orders lag",
    "enabled": "on",
    "kind": AlertRule.LAG_MESSAGES,
    "threshold": "1000",
    "scope": AlertRule.SCOPE_MATCH,
    "group_pattern": "orders-.*",
    "topic_pattern": "",
    "for_seconds": "60",
    "repeat_seconds": "3600",
    "recipients": "ops@example.com\noncall@example.com",
}


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def later(hours: float = 2) -> str:
    return (timezone.localtime() + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


@pytest.fixture
def firing_event(db):
    """A rule firing now for group billing."""
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="")
    evaluate([group("billing", lag=500)], None, timezone.now())
    return AlertEvent.objects.get()


def rule_url(rule, suffix=""):
    return f"/alerts/rules/{rule.pk}/{suffix}"


# ----------------------------------------------------------------------------- reading


def test_anonymous_is_sent_to_login(client):
    response = client.get(INDEX)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/alerts/")


def test_user_without_role_is_refused(as_nobody):
    assert as_nobody.get(INDEX).status_code == 403


def test_nav_links_to_alerts(as_viewer):
    assert 'href="/alerts/" aria-current="page"' in page_text(as_viewer.get(INDEX))


def test_viewer_sees_events_rules_and_silences(as_viewer, firing_event):
    make_silence(None, "shipping", ends_at=timezone.now() + timedelta(hours=1))
    text = page_text(as_viewer.get(INDEX))
    assert "billing lag" in text
    assert "500 messages" in text
    assert "lag > 100 messages" in text
    assert "every rule, /shipping/" in text


def test_viewer_sees_no_action_buttons(as_viewer, firing_event):
    make_silence(None, ends_at=timezone.now() + timedelta(hours=1))
    text = page_text(as_viewer.get(INDEX))
    for action in ("New rule", "Edit", "Disable", "Delete", "Silence<", "Expire now", "Send test"):
        assert action not in text
    assert 'method="post" action="/alerts' not in text


def test_past_events_are_paged(as_viewer):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    start = timezone.now() - timedelta(days=1)
    for n in range(30):
        evaluate([group("billing", lag=500)], None, start + timedelta(minutes=2 * n))
        evaluate([group("billing", lag=0)], None, start + timedelta(minutes=2 * n + 1))
    first = page_text(as_viewer.get(INDEX))
    second = page_text(as_viewer.get(INDEX + "?page=2"))
    assert "30 resolved events" in first
    assert "Page 1 of 2" in first
    assert "Page 2 of 2" in second


# Not named "page": pytest-playwright would take the test for a browser test.
@pytest.mark.parametrize("number", ["abc", "999", "-1", "1" * 40])
def test_a_bad_page_number_is_not_an_error(as_viewer, number):
    assert as_viewer.get(INDEX, {"page": number}).status_code == 200


# ---------------------------------------------------------------------- viewer's POSTs


@pytest.mark.parametrize(
    "path",
    [
        NEW_RULE,
        "/alerts/rules/{rule}/",
        "/alerts/rules/{rule}/action/",
        NEW_SILENCE,
        "/alerts/silences/{silence}/expire/",
        TEST_EMAIL,
    ],
)
def test_viewer_post_is_refused_and_changes_nothing(as_viewer, path, mailoutbox):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    silence = make_silence(None, ends_at=timezone.now() + timedelta(hours=1))
    data = {
        **RULE_POST,
        "action": "delete",
        "reason": "x",
        "ends_at": later(),
        "recipients": "a@example.com",
    }
    response = as_viewer.post(path.format(rule=rule.pk, silence=silence.pk), data)
    assert response.status_code == 403
    assert list(AlertRule.objects.values_list("name", "enabled")) == [(rule.name, True)]
    assert Silence.objects.get().ends_at == silence.ends_at
    assert Silence.objects.count() == 1
    assert not AuditEntry.objects.exists()
    assert mailoutbox == []


def test_operator_cannot_manage_rules(as_operator):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    assert as_operator.post(NEW_RULE, RULE_POST).status_code == 403
    assert as_operator.post(rule_url(rule, "action/"), {"action": "delete"}).status_code == 403
    assert AlertRule.objects.count() == 1


def test_operator_cannot_send_the_test_email(as_operator, mailoutbox):
    assert as_operator.post(TEST_EMAIL, {"recipients": "a@example.com"}).status_code == 403
    assert mailoutbox == []


# -------------------------------------------------------------------- operator: silences


def test_operator_sees_a_silence_link_on_a_firing_event(as_operator, firing_event):
    text = page_text(as_operator.get(INDEX))
    assert f'href="/alerts/silences/new/?event={firing_event.pk}"' in text
    assert "New rule" not in text


def test_silence_form_from_an_event_is_filled_in(as_operator, firing_event):
    response = as_operator.get(NEW_SILENCE, {"event": firing_event.pk})
    form = response.context["form"]
    assert form.initial["rule"] == firing_event.rule_id
    assert form.initial["subject_pattern"] == "billing"


def test_operator_silences_a_firing_event(as_operator, operator, firing_event):
    data = {
        "event": firing_event.pk,
        "rule": firing_event.rule_id,
        "subject_pattern": "billing",
        "ends_at": later(2),
        "reason": "deploying billing",
    }
    response = as_operator.post(NEW_SILENCE, data)
    assert response.status_code == 302
    silence = Silence.objects.get()
    assert (silence.rule_id, silence.subject_pattern) == (firing_event.rule_id, "billing")
    assert silence.created_by == operator
    assert silence.covers(firing_event.rule_id, "billing", timezone.now())
    entry = AuditEntry.objects.get(action="alert.silence.create")
    assert entry.username == "otto"
    assert entry.after["reason"] == "deploying billing"


def test_the_page_shows_a_silenced_event(as_operator, firing_event):
    make_silence(firing_event.rule, "billing", ends_at=timezone.now() + timedelta(hours=1))
    assert "silenced until" in page_text(as_operator.get(INDEX))


@pytest.mark.parametrize(
    "change, field",
    [
        ({"ends_at": "2000-01-01T00:00"}, "ends_at"),
        ({"ends_at": "not a date"}, "ends_at"),
        ({"ends_at": "2026-13-45T99:99"}, "ends_at"),
        ({"ends_at": ""}, "ends_at"),
        ({"subject_pattern": "billing("}, "subject_pattern"),
        ({"subject_pattern": "x" * 300}, "subject_pattern"),
        ({"reason": "   "}, "reason"),
        ({"rule": "999999"}, "rule"),
        ({"rule": "abc"}, "rule"),
    ],
)
def test_bad_silence_input_shows_errors_and_creates_nothing(as_operator, change, field):
    data = {"rule": "", "subject_pattern": "", "ends_at": later(), "reason": "why", **change}
    response = as_operator.post(NEW_SILENCE, data)
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not Silence.objects.exists()
    assert not AuditEntry.objects.exists()


def test_a_silence_may_not_outlast_ninety_days(as_operator):
    data = {"subject_pattern": "", "ends_at": later(24 * 91), "reason": "why"}
    response = as_operator.post(NEW_SILENCE, data)
    assert response.context["form"].errors["ends_at"]
    assert not Silence.objects.exists()


@pytest.mark.parametrize("event", ["abc", "999999", "-1", "9" * 40])
def test_a_bad_event_in_the_silence_form_is_ignored(as_operator, event):
    assert as_operator.get(NEW_SILENCE, {"event": event}).status_code == 200


def test_operator_expires_a_silence_early(as_operator):
    silence = make_silence(None, ends_at=timezone.now() + timedelta(hours=1))
    response = as_operator.post(f"/alerts/silences/{silence.pk}/expire/")
    assert response.status_code == 302
    silence.refresh_from_db()
    assert not silence.is_active()
    entry = AuditEntry.objects.get(action="alert.silence.expire")
    assert entry.before["ends_at"] != entry.after["ends_at"]


def test_expiring_an_ended_silence_changes_nothing(as_operator):
    ended = timezone.now() - timedelta(hours=1)
    silence = make_silence(None, starts_at=ended - timedelta(hours=1), ends_at=ended)
    as_operator.post(f"/alerts/silences/{silence.pk}/expire/")
    silence.refresh_from_db()
    assert silence.ends_at == ended
    assert not AuditEntry.objects.exists()


def test_expiring_a_missing_silence_is_404(as_operator):
    assert as_operator.post("/alerts/silences/999999/expire/").status_code == 404


# --------------------------------------------------------------------------- admin: rules


def test_admin_sees_rule_actions_and_the_test_email_form(as_admin):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    text = page_text(as_admin.get(INDEX))
    for action in ("New rule", "Edit", "Disable", "Delete", "Send test email"):
        assert action in text


def test_admin_creates_a_rule(as_admin):
    response = as_admin.post(NEW_RULE, RULE_POST)
    assert response.status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.name, rule.kind, rule.threshold) == ("orders lag", AlertRule.LAG_MESSAGES, 1000)
    assert (rule.scope, rule.group_pattern, rule.for_seconds) == ("match", "orders-.*", 60)
    assert rule.recipient_list() == ["ops@example.com", "oncall@example.com"]
    entry = AuditEntry.objects.get(action="alert.rule.create")
    assert (entry.username, entry.target, entry.before) == ("ada", "alert rule orders lag", None)
    assert entry.after["group_pattern"] == "orders-.*"


def test_a_status_rule_needs_no_threshold(as_admin):
    data = {**RULE_POST, "kind": AlertRule.STATUS_ERR, "threshold": ""}
    assert as_admin.post(NEW_RULE, data).status_code == 302
    assert AlertRule.objects.get().threshold is None


def test_a_disk_rule_takes_a_ratio(as_admin):
    data = {
        **RULE_POST,
        "kind": AlertRule.DISK_RATIO,
        "threshold": "0.85",
        "scope": "all",
        "group_pattern": "",
    }
    assert as_admin.post(NEW_RULE, data).status_code == 302
    assert AlertRule.objects.get().threshold == 0.85


@pytest.mark.parametrize(
    "change, field",
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"kind": "nonsense"}, "kind"),
        ({"threshold": ""}, "threshold"),
        ({"threshold": "many"}, "threshold"),
        ({"threshold": "-5"}, "threshold"),
        ({"threshold": "nan"}, "threshold"),
        ({"threshold": "inf"}, "threshold"),
        (
            {"kind": AlertRule.DISK_RATIO, "threshold": "1.5", "scope": "all", "group_pattern": ""},
            "threshold",
        ),
        ({"kind": AlertRule.DISK_RATIO, "threshold": "0.8"}, "scope"),
        ({"kind": AlertRule.EXPIRY_HOURS, "threshold": "0"}, "threshold"),
        ({"group_pattern": "orders-(["}, "group_pattern"),
        ({"topic_pattern": "*oops"}, "topic_pattern"),
        ({"group_pattern": "a" * 201}, "group_pattern"),
        ({"scope": "match", "group_pattern": ""}, "group_pattern"),
        ({"scope": "all"}, "group_pattern"),
        ({"scope": "everything"}, "scope"),
        ({"for_seconds": "-1"}, "for_seconds"),
        ({"for_seconds": "999999999"}, "for_seconds"),
        ({"for_seconds": "soon"}, "for_seconds"),
        ({"repeat_seconds": "5"}, "repeat_seconds"),
        ({"repeat_seconds": "1e99"}, "repeat_seconds"),
        ({"recipients": "ops@example.com, not-an-address"}, "recipients"),
        ({"recipients": " ".join(f"u{n}@example.com" for n in range(51))}, "recipients"),
    ],
)
def test_bad_rule_input_shows_errors_and_changes_nothing(as_admin, change, field):
    response = as_admin.post(NEW_RULE, {**RULE_POST, **change})
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not AlertRule.objects.exists()
    assert not AuditEntry.objects.exists()


def test_a_rule_name_is_unique(as_admin):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="orders lag")
    response = as_admin.post(NEW_RULE, RULE_POST)
    assert response.context["form"].errors["name"]
    assert AlertRule.objects.count() == 1


def test_admin_edits_a_rule_with_an_audit_of_before_and_after(as_admin):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100, name="orders lag")
    assert as_admin.get(rule_url(rule)).status_code == 200
    response = as_admin.post(rule_url(rule), {**RULE_POST, "threshold": "5000"})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.threshold == 5000
    entry = AuditEntry.objects.get(action="alert.rule.update")
    assert (entry.before["threshold"], entry.after["threshold"]) == (100, 5000)


def test_a_bad_edit_changes_nothing(as_admin):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100, name="orders lag")
    response = as_admin.post(rule_url(rule), {**RULE_POST, "group_pattern": "(("})
    assert response.status_code == 200
    assert "Not a valid RE2 regular expression: missing ): ((" in page_text(response)
    rule.refresh_from_db()
    assert (rule.threshold, rule.group_pattern) == (100, "")
    assert not AuditEntry.objects.exists()


def test_editing_a_missing_rule_is_404(as_admin):
    assert as_admin.get("/alerts/rules/999999/").status_code == 404


def test_admin_disables_and_enables_a_rule(as_admin):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    as_admin.post(rule_url(rule, "action/"), {"action": "disable"})
    rule.refresh_from_db()
    assert not rule.enabled
    as_admin.post(rule_url(rule, "action/"), {"action": "enable"})
    rule.refresh_from_db()
    assert rule.enabled
    entries = AuditEntry.objects.order_by("id")
    assert [e.action for e in entries] == ["alert.rule.disable", "alert.rule.enable"]
    assert (entries[0].before["enabled"], entries[0].after["enabled"]) == (True, False)


def test_admin_deletes_a_rule_and_keeps_its_history(as_admin, firing_event):
    rule = firing_event.rule
    response = as_admin.post(rule_url(rule, "action/"), {"action": "delete"})
    assert response.status_code == 302
    assert not AlertRule.objects.exists()
    firing_event.refresh_from_db()
    assert (firing_event.rule_id, firing_event.state) == (None, AlertEvent.RESOLVED)
    assert "(deleted)" in page_text(as_admin.get(INDEX))
    entry = AuditEntry.objects.get(action="alert.rule.delete")
    assert (entry.before["name"], entry.after) == ("billing lag", None)


def test_an_unknown_rule_action_changes_nothing(as_admin):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    response = as_admin.post(rule_url(rule, "action/"), {"action": "explode"})
    assert response.status_code == 302
    assert AlertRule.objects.get().enabled
    assert not AuditEntry.objects.exists()


def test_a_get_on_a_rule_action_goes_to_the_rules_and_changes_nothing(as_admin):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    response = as_admin.get(rule_url(rule, "action/"))
    assert (response.status_code, response["Location"]) == (303, "/alerts/#rules")
    assert AlertRule.objects.get().enabled


# ---------------------------------------------------------------------- admin: test email


def test_admin_sends_a_test_email(as_admin, mailoutbox):
    response = as_admin.post(TEST_EMAIL, {"recipients": "a@example.com, b@example.com"})
    assert response.status_code == 302
    (mail,) = mailoutbox
    assert mail.to == ["a@example.com", "b@example.com"]
    assert mail.subject == "[Tidemark] Test email"
    entry = AuditEntry.objects.get(action="alert.test_email")
    assert (entry.after, entry.detail) == (
        {"recipients": ["a@example.com", "b@example.com"]},
        "sent",
    )


@pytest.mark.parametrize("recipients", ["", "not-an-address", "a@example.com bad"])
def test_a_test_email_to_bad_addresses_is_not_sent(as_admin, mailoutbox, recipients):
    response = as_admin.post(TEST_EMAIL, {"recipients": recipients}, follow=True)
    assert response.status_code == 200
    assert "No test email was sent" in page_text(response)
    assert mailoutbox == []
    assert not AuditEntry.objects.exists()


def test_a_refusing_mail_server_is_reported_not_a_500(as_admin, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("no mail server here")

    monkeypatch.setattr("console.alerts.views.send_mail", refuse)
    response = as_admin.post(TEST_EMAIL, {"recipients": "a@example.com"}, follow=True)
    assert response.status_code == 200
    assert "could not be sent" in page_text(response)
    assert AuditEntry.objects.get(action="alert.test_email").detail.startswith("failed")
