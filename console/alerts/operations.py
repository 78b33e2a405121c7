"""Alert changes, each written to the audit log: the /alerts/ pages and /api/v1/alerts/ call
these, so a change is validated, made and audited the same way through either.

The validation is the forms' (console/alerts/forms.py): a caller binds ``RuleForm``,
``SilenceForm`` or ``TestEmailForm``, checks ``is_valid()`` and passes the valid form here.
Every database change and its audit row are saved in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.mail import send_mail
from django.db import transaction
from django.forms.models import model_to_dict
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from console.alerts.forms import RuleForm, SilenceForm
from console.alerts.models import AlertEvent, AlertRule, Silence
from console.audit.log import record

TEST_EMAIL_SUBJECT = "[Tidemark] Test email"


def index_url(anchor: str = "") -> str:
    return reverse("alerts:index") + (f"#{anchor}" if anchor else "")


def rule_target(rule: AlertRule) -> str:
    return f"alert rule {rule.name}"


def silence_target(silence: Silence) -> str:
    return f"silence {silence.pk} ({silence.scope_text()})"


def rule_form_data(rule: AlertRule) -> dict[str, Any]:
    """The rule's fields as ``RuleForm`` data (to change some of them and bind the rest)."""
    return model_to_dict(rule, fields=RuleForm.Meta.fields)


def silenced_by(event: AlertEvent, silences: list[Silence], now: datetime) -> Silence | None:
    """The first of ``silences`` (the active ones) that mutes ``event``'s mail, or None."""
    topics = (event.details or {}).get("topics") or ()
    return next((s for s in silences if s.covers(event.rule_id, event.subject, now, topics)), None)


# ----------------------------------------------------------------------------------- rules


def create_rule(user: Any, form: RuleForm) -> AlertRule:
    """Save a valid ``RuleForm`` (made without an instance) as a new rule."""
    with transaction.atomic():
        rule = form.save()
        record(
            user,
            "alert.rule.create",
            rule_target(rule),
            after=rule.state(),
            link=index_url("rules"),
        )
    return rule


def update_rule(user: Any, form: RuleForm) -> bool:
    """Save a valid ``RuleForm`` bound to a rule; whether anything changed (an audit row
    with the state before and after only then)."""
    with transaction.atomic():
        current = AlertRule.objects.select_for_update().filter(pk=form.instance.pk).first()
        if current is None:
            raise Http404("The alert rule no longer exists.")
        before = current.state()
        rule = form.save(commit=False)
        rule.updated_at = timezone.now()
        rule.save()
        after = rule.state()
        if after != before:
            record(
                user,
                "alert.rule.update",
                rule_target(rule),
                before,
                after,
                link=index_url("rules"),
            )
    return after != before


def set_enabled(user: Any, rule: AlertRule, enabled: bool) -> bool:
    """Enable or disable the rule; False (and no audit row) when it already was so."""
    if rule.enabled == enabled:
        return False
    verb = "enable" if enabled else "disable"
    before = rule.state()
    with transaction.atomic():
        updated = AlertRule.objects.filter(pk=rule.pk, enabled=not enabled).update(
            enabled=enabled, updated_at=timezone.now()
        )
        if updated:
            rule.enabled = enabled
            record(
                user,
                f"alert.rule.{verb}",
                rule_target(rule),
                before,
                rule.state(),
                link=index_url("rules"),
            )
    return bool(updated)


def delete_rule(user: Any, rule: AlertRule) -> None:
    """Delete the rule; its past events stay (by name), its open ones end without mail."""
    name = rule.name
    with transaction.atomic():
        before = rule.state()
        now = timezone.now()
        rule.events.filter(state=AlertEvent.PENDING).delete()
        rule.events.filter(state=AlertEvent.FIRING).update(
            state=AlertEvent.RESOLVED, resolved_at=now, resolve_announced_at=now
        )
        rule.delete()
        record(user, "alert.rule.delete", f"alert rule {name}", before=before)


# -------------------------------------------------------------------------------- silences


def create_silence(user: Any, form: SilenceForm) -> Silence:
    """Save a valid ``SilenceForm``: a silence from its start (now, or later) to its end."""
    with transaction.atomic():
        silence = form.save(commit=False)
        silence.starts_at = form.cleaned_data["starts_at"]
        silence.created_by = user
        silence.created_by_name = user.get_username()
        silence.save()
        record(
            user,
            "alert.silence.create",
            silence_target(silence),
            after=silence.state(),
            link=index_url("silences"),
        )
    return silence


def expire_silence(user: Any, silence: Silence, now: datetime | None = None) -> bool:
    """End the silence now; False (and no audit row) when it had already ended."""
    now = now or timezone.now()
    if silence.ends_at <= now:
        return False
    before = silence.state()
    with transaction.atomic():
        expired = Silence.objects.filter(pk=silence.pk, ends_at__gt=now).update(ends_at=now)
        if expired:
            silence.ends_at = now
            record(
                user,
                "alert.silence.expire",
                silence_target(silence),
                before,
                silence.state(),
                link=index_url("silences"),
            )
    return bool(expired)


# ------------------------------------------------------------------------------ test email


def send_test_email(
    user: Any, recipients: list[str], mailer: Callable[..., Any] | None = None
) -> str | None:
    """Mail a test message to ``recipients`` (a valid ``TestEmailForm``'s) and audit it,
    sent or not: None when sent, else what the mail server said.

    ``mailer`` stands in for ``django.core.mail.send_mail`` (looked up at each call).
    """
    try:
        (mailer or send_mail)(
            TEST_EMAIL_SUBJECT,
            "This is a test email from the Tidemark console: alert mail reaches you.\n"
            f"Sent by {user.get_username()} at "
            f"{timezone.localtime():%Y-%m-%d %H:%M:%S %Z}.\n",
            None,
            recipients,
            fail_silently=False,
        )
    except Exception as error:  # the mail server's refusal, said to the caller
        failure = f"failed: {type(error).__name__}: {error}"[:1000]
    else:
        failure = None
    record(
        user,
        "alert.test_email",
        "alert mail",
        after={"recipients": recipients},
        detail=failure or "sent",
    )
    return failure
