"""/alerts/: firing and past events, rules and silences.

Everyone with a role reads the page. Operators create silences (from a firing event, or
from scratch) and expire them early; admins create, edit, enable, disable and delete rules
and send a test email. Every change is a POST with CSRF and goes through
console/alerts/operations.py (shared with /api/v1/alerts/), which writes an audit row with
the state before and after, in the same transaction as the change.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.core.mail import send_mail
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_safe

from console.alerts import operations
from console.alerts.evaluate import active_silences
from console.alerts.forms import RuleForm, SilenceForm, TestEmailForm
from console.alerts.models import AlertEvent, AlertRule, Notification, Silence
from console.alerts.operations import index_url as _index_url
from console.alerts.visibility import (
    visible_events,
    visible_notifications,
    visible_rules,
    visible_silences,
)
from console.core.post_only import post_only

PAST_PAGE_SIZE = 25
#: Ended silences shown under the active ones, and the latest notifications shown.
RECENT_SILENCES = 10
RECENT_NOTIFICATIONS = 20


# ------------------------------------------------------------------------------------ page


@require_safe
def index(request: HttpRequest) -> HttpResponse:
    return _index_page(request, TestEmailForm())


def _index_page(request: HttpRequest, test_form: TestEmailForm) -> HttpResponse:
    """The alerts page; the test-email form as given (a refused one keeps what was typed)."""
    now = timezone.now()
    silences = active_silences(now)
    user = request.user
    events = visible_events(user, AlertEvent.objects.all())
    firing = list(events.filter(state=AlertEvent.FIRING).order_by("-started_at"))
    firing_rows = [
        {
            "event": e,
            "silence": operations.silenced_by(e, silences, now),
            "delivery": e.latest_notification(),
        }
        for e in firing
    ]
    pending = events.filter(state=AlertEvent.PENDING).order_by("since")
    past = events.filter(state=AlertEvent.RESOLVED).order_by("-resolved_at", "-id")
    page = Paginator(past, PAST_PAGE_SIZE).get_page(request.GET.get("page"))
    shown = visible_silences(user, Silence.objects.select_related("rule"))
    ended = shown.filter(ends_at__lte=now)[:RECENT_SILENCES]
    return render(
        request,
        "alerts/index.html",
        {
            "firing_rows": firing_rows,
            "pending": pending,
            "page": page,
            "rules": visible_rules(user, AlertRule.objects.all()),
            "silences": shown.filter(ends_at__gt=now).order_by("ends_at"),
            "ended_silences": ended,
            "notifications": visible_notifications(user, Notification.objects.all())[
                :RECENT_NOTIFICATIONS
            ],
            "test_form": test_form,
            "now": now,
        },
    )


# ----------------------------------------------------------------------------------- rules


@require_http_methods(["GET", "HEAD", "POST"])
def rule_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = RuleForm(request.POST)
        if form.is_valid():
            rule = operations.create_rule(request.user, form)
            messages.success(request, f"Created the alert rule {rule.name}.")
            return redirect(_index_url("rules"))
    else:
        form = RuleForm()
    return render(request, "alerts/rule_form.html", {"form": form, "rule": None})


@require_http_methods(["GET", "HEAD", "POST"])
def rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    if request.method == "POST":
        form = RuleForm(request.POST, instance=rule)
        if form.is_valid():
            if not operations.update_rule(request.user, form):
                messages.info(request, f"{rule.name} was not changed.")
            else:
                messages.success(request, f"Saved the alert rule {rule.name}.")
            return redirect(_index_url("rules"))
        rule = get_object_or_404(AlertRule, pk=rule_id)  # the form's errors left it dirty
    else:
        form = RuleForm(instance=rule)
    return render(request, "alerts/rule_form.html", {"form": form, "rule": rule})


def _set_enabled(request: HttpRequest, rule: AlertRule, enabled: bool) -> HttpResponse:
    verb = "enable" if enabled else "disable"
    if rule.enabled == enabled:
        messages.info(request, f"{rule.name} is already {verb}d; nothing was changed.")
        return redirect(_index_url("rules"))
    operations.set_enabled(request.user, rule, enabled)
    if enabled:
        messages.success(request, f"Enabled {rule.name}.")
    else:
        messages.success(
            request, f"Disabled {rule.name}; its firing events resolve at the next evaluation."
        )
    return redirect(_index_url("rules"))


def _delete(request: HttpRequest, rule: AlertRule) -> HttpResponse:
    name = rule.name
    # Its history stays (rule_name); open events end with it, without mail.
    operations.delete_rule(request.user, rule)
    messages.success(request, f"Deleted the alert rule {name}; its past events are kept.")
    return redirect(_index_url("rules"))


@post_only(lambda rule_id: _index_url("rules"))
def rule_action(request: HttpRequest, rule_id: int) -> HttpResponse:
    """POST ``action``: enable, disable or delete."""
    rule = get_object_or_404(AlertRule, pk=rule_id)
    action = request.POST.get("action", "")
    if action == "enable":
        return _set_enabled(request, rule, True)
    if action == "disable":
        return _set_enabled(request, rule, False)
    if action == "delete":
        return _delete(request, rule)
    messages.error(request, "That action is not known; nothing was changed.")
    return redirect(_index_url("rules"))


# -------------------------------------------------------------------------------- silences


def _event_from(request: HttpRequest) -> AlertEvent | None:
    raw = request.GET.get("event") or request.POST.get("event") or ""
    if not raw.isdigit() or len(raw) > 18:
        return None
    return AlertEvent.objects.filter(pk=int(raw)).first()


@require_http_methods(["GET", "HEAD", "POST"])
def silence_create(request: HttpRequest) -> HttpResponse:
    """The silence form; ``?event=<id>`` fills it in for that event's rule and subject."""
    event = _event_from(request)
    if request.method == "POST":
        form = SilenceForm(request.POST)
        if form.is_valid():
            silence = operations.create_silence(request.user, form)
            messages.success(
                request,
                f"Silenced {silence.scope_text()} until "
                f"{timezone.localtime(silence.ends_at):%Y-%m-%d %H:%M %Z}.",
            )
            return redirect(_index_url("silences"))
    else:
        initial: dict[str, Any] = {}
        if event is not None:
            initial = {"rule": event.rule_id, "subject_pattern": re.escape(event.subject)}
        form = SilenceForm(initial=initial)
    return render(request, "alerts/silence_form.html", {"form": form, "event": event})


@post_only(lambda silence_id: _index_url("silences"))
def silence_expire(request: HttpRequest, silence_id: int) -> HttpResponse:
    silence = get_object_or_404(Silence.objects.select_related("rule"), pk=silence_id)
    now = timezone.now()
    if silence.ends_at <= now:
        messages.info(request, "That silence has already ended; nothing was changed.")
        return redirect(_index_url("silences"))
    operations.expire_silence(request.user, silence, now)
    messages.success(request, f"Ended the silence of {silence.scope_text()}; mail resumes.")
    return redirect(_index_url("silences"))


# ------------------------------------------------------------------------------ test email


@post_only(lambda: _index_url("test-email"))
def test_email(request: HttpRequest) -> HttpResponse:
    form = TestEmailForm(request.POST)
    if not form.is_valid():
        for error in form.errors.get("recipients", []):
            messages.error(request, f"No test email was sent: {error}")
        return _index_page(request, form)
    recipients = form.cleaned_data["recipients"]
    # This module's send_mail, so that a test may stand in for the mail server here.
    failure = operations.send_test_email(request.user, recipients, mailer=send_mail)
    if failure is not None:
        messages.error(request, f"The test email could not be sent ({failure}).")
        return _index_page(request, form)
    messages.success(request, f"Sent a test email to {', '.join(recipients)}.")
    return redirect(_index_url("test-email"))
