"""The alert pages' forms: rules (admins), silences (operators), the test email (admins)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from console.alerts import kinds
from console.alerts.models import (
    DEFAULT_GROUP_INTERVAL_SECONDS,
    DEFAULT_KEEP_FIRING_SECONDS,
    MAX_PATTERN_LENGTH,
    AlertRule,
    Silence,
    compile_pattern,
)

#: The most addresses a rule (or a test email) may mail.
MAX_RECIPIENTS = 50
#: The longest for-duration and repeat interval: a week, and 30 days.
MAX_FOR_SECONDS = 7 * 86400
MAX_REPEAT_SECONDS = 30 * 86400
#: The shortest repeat interval (0 turns reminders off).
MIN_REPEAT_SECONDS = 60
#: The longest keep-firing duration and group interval: a day.
MAX_DAMPING_SECONDS = 86400
#: The longest silence, and how far ahead one may start.
MAX_SILENCE = timedelta(days=90)
MAX_SILENCE_START = timedelta(days=90)
#: The largest threshold accepted for counts and durations.
MAX_THRESHOLD = kinds.MAX_THRESHOLD
#: The longest webhook URL.
MAX_URL_LENGTH = 500


def parse_recipients(text: str) -> list[str]:
    """Addresses separated by new lines, commas, semicolons or spaces; ValidationError if one
    is not an address. Duplicates are dropped, the order kept."""
    addresses: list[str] = []
    bad: list[str] = []
    for part in re.split(r"[\s,;]+", text or ""):
        if not part:
            continue
        try:
            validate_email(part)
        except ValidationError:
            bad.append(part if len(part) <= 60 else part[:60] + "…")
            continue
        if part.lower() not in (a.lower() for a in addresses):
            addresses.append(part)
    if bad:
        raise ValidationError(
            f"Not an email address: {', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}."
        )
    if len(addresses) > MAX_RECIPIENTS:
        raise ValidationError(f"At most {MAX_RECIPIENTS} addresses, please.")
    return addresses


def http_url(url: str) -> str:
    """``url`` stripped when it is http(s) or empty, else ValidationError."""
    url = url.strip()
    if url and not url.lower().startswith(("http://", "https://")):
        raise ValidationError("An http:// or https:// URL, please.")
    return url


def is_webhook_url(value: str) -> bool:
    """Whether the rule form takes ``value`` as its webhook URL (empty: none)."""
    try:
        http_url(RuleForm.base_fields["webhook_url"].clean(value) or "")
    except ValidationError:
        return False
    return True


def is_one_address(value: str) -> bool:
    """Whether ``value`` is one email address, exactly as the forms read a list of them."""
    try:
        return parse_recipients(value) == [value]
    except ValidationError:
        return False


def pattern_error(value: str) -> str | None:
    """Why the forms do not take ``value`` as a regex (RE2, or blank: none), or None."""
    try:
        clean_pattern(value)
    except ValidationError as error:
        return error.messages[0]
    return None


def clean_pattern(value: str) -> str:
    value = (value or "").strip()
    if value:
        try:
            compile_pattern(value)
        except ValueError as error:
            raise ValidationError(str(error)) from None
    return value


class RuleForm(forms.ModelForm):
    threshold = forms.FloatField(
        required=False,
        label="Threshold (N)",
        help_text=(
            "Messages, seconds, hours, or a ratio between 0 and 1 for disk use; "
            "not used by the status conditions."
        ),
    )
    for_seconds = forms.IntegerField(
        required=False,
        label="For (seconds)",
        min_value=0,
        max_value=MAX_FOR_SECONDS,
        help_text=(
            "How long the condition must hold before the rule fires; 0 fires at once. "
            "Empty: the condition's default (two sample intervals for the status "
            "conditions, else 0)."
        ),
    )
    repeat_seconds = forms.IntegerField(
        label="Repeat every (seconds)",
        min_value=0,
        max_value=MAX_REPEAT_SECONDS,
        initial=3600,
        help_text=(
            f"A reminder while it keeps firing; 0 for none, else at least {MIN_REPEAT_SECONDS}."
        ),
    )
    keep_firing_seconds = forms.IntegerField(
        required=False,
        label="Keep firing (seconds)",
        min_value=0,
        max_value=MAX_DAMPING_SECONDS,
        initial=DEFAULT_KEEP_FIRING_SECONDS,
        help_text="Flap damping: it resolves only once the condition has been clear this long.",
    )
    group_interval_seconds = forms.IntegerField(
        required=False,
        label="Group interval (seconds)",
        min_value=0,
        max_value=MAX_DAMPING_SECONDS,
        initial=DEFAULT_GROUP_INTERVAL_SECONDS,
        help_text="At most one firing or resolved notification per subject this often.",
    )
    recipients = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Email addresses, one a line; empty records events without mail.",
    )
    webhook_url = forms.URLField(
        required=False,
        max_length=MAX_URL_LENGTH,
        assume_scheme="https",
        label="Webhook URL",
        help_text="Receives an Alertmanager-style JSON POST per notification; empty: none.",
    )

    class Meta:
        model = AlertRule
        fields = [
            "name",
            "enabled",
            "kind",
            "threshold",
            "scope",
            "group_pattern",
            "topic_pattern",
            "for_seconds",
            "repeat_seconds",
            "keep_firing_seconds",
            "group_interval_seconds",
            "recipients",
            "webhook_url",
        ]
        labels = {
            "kind": "Condition",
            "group_pattern": "Group regex",
            "topic_pattern": "Topic regex",
        }
        help_texts = {
            "group_pattern": "An RE2 regular expression matched against the whole group name "
            "(linear time: no back-references); empty: any group.",
            "topic_pattern": "The group must consume a matching topic; lag and status are "
            "then taken over those topics' queues. Empty: any topic.",
        }
        widgets = {
            "name": forms.TextInput(attrs={"autocomplete": "off"}),
            "group_pattern": forms.TextInput(attrs={"spellcheck": "false"}),
            "topic_pattern": forms.TextInput(attrs={"spellcheck": "false"}),
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        built_in = self.instance.pk is not None and self.instance.is_built_in
        self.fields["kind"].choices = kinds.choices(include_built_in=built_in)

    def clean_keep_firing_seconds(self) -> int:
        value = self.cleaned_data.get("keep_firing_seconds")
        return DEFAULT_KEEP_FIRING_SECONDS if value is None else value

    def clean_group_interval_seconds(self) -> int:
        value = self.cleaned_data.get("group_interval_seconds")
        return DEFAULT_GROUP_INTERVAL_SECONDS if value is None else value

    def clean_webhook_url(self) -> str:
        return http_url(self.cleaned_data.get("webhook_url") or "")

    def clean_name(self) -> str:
        name = (self.cleaned_data.get("name") or "").strip()
        if not name:
            raise ValidationError("Give the rule a name.")
        return name

    def clean_group_pattern(self) -> str:
        return clean_pattern(self.cleaned_data.get("group_pattern", ""))

    def clean_topic_pattern(self) -> str:
        return clean_pattern(self.cleaned_data.get("topic_pattern", ""))

    def clean_recipients(self) -> str:
        return "\n".join(parse_recipients(self.cleaned_data.get("recipients", "")))

    def clean_repeat_seconds(self) -> int:
        value = self.cleaned_data["repeat_seconds"]
        if 0 < value < MIN_REPEAT_SECONDS:
            raise ValidationError(f"0 for no reminders, or at least {MIN_REPEAT_SECONDS} seconds.")
        return value

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("kind")
        scope = data.get("scope")
        threshold = data.get("threshold")
        patterns = [name for name in ("group_pattern", "topic_pattern") if data.get(name)]
        if kind in AlertRule.STORE_KINDS:
            if scope == AlertRule.SCOPE_MATCH or patterns:
                self.add_error(
                    "scope",
                    "This condition is store-wide: choose all groups and leave the regexes empty.",
                )
        elif scope == AlertRule.SCOPE_ALL:
            for name in patterns:
                self.add_error(name, "Choose the matching scope to use a regex, or clear it.")
        elif (
            scope == AlertRule.SCOPE_MATCH
            and not patterns
            and not any(self.has_error(name) for name in ("group_pattern", "topic_pattern"))
        ):
            self.add_error("group_pattern", "Give a group regex, a topic regex or both.")
        if (
            kind in kinds.KINDS
            and data.get("for_seconds") is None
            and not self.has_error("for_seconds")
        ):
            data["for_seconds"] = kinds.KINDS[kind].default_for_seconds()
        if kind in kinds.KINDS and not self.has_error("threshold"):
            try:
                data["threshold"] = kinds.KINDS[kind].clean_threshold(threshold)
            except ValidationError as error:
                self.add_error("threshold", error)
        return data


LATE_START = "A silence starts at most 90 days ahead."


def silence_start(starts_at: datetime | None, now: datetime) -> datetime:
    """When a silence asked to start at ``starts_at`` starts: now when None or past."""
    return now if starts_at is None or starts_at < now else starts_at


def silence_problem(
    starts_at: datetime | None, ends_at: datetime, now: datetime
) -> tuple[str, str] | None:
    """(field, sentence) of what the silence form refuses in a silence from ``starts_at``
    to ``ends_at`` at ``now``, or None."""
    start = silence_start(starts_at, now)
    if start - now > MAX_SILENCE_START:
        return "starts_at", LATE_START
    if ends_at <= now:
        return "ends_at", "The end must be in the future."
    if ends_at <= start:
        return "ends_at", "The end must come after the start."
    if ends_at - start > MAX_SILENCE:
        return "ends_at", "A silence lasts at most 90 days."
    return None


def _local_minute(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


class SilenceForm(forms.ModelForm):
    rule = forms.ModelChoiceField(
        queryset=AlertRule.objects.order_by("name"),
        required=False,
        empty_label="Every rule",
        help_text="The rule whose mail to silence.",
    )
    subject_pattern = forms.CharField(
        required=False,
        max_length=MAX_PATTERN_LENGTH,
        label="Group regex",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
        help_text='An RE2 regex for the whole group name (or "store", "monitoring"); empty: all.',
    )
    topic_pattern = forms.CharField(
        required=False,
        max_length=MAX_PATTERN_LENGTH,
        label="Topic regex",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
        help_text="An RE2 regex: only groups consuming a matching topic; empty: any.",
    )
    starts_at = forms.DateTimeField(
        label="Starts at",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Empty: now. A later start silences a planned maintenance ahead of time.",
    )
    ends_at = forms.DateTimeField(
        label="Ends at",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="In UTC; at most 90 days ahead.",
    )
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why it is silenced, for the others on call.",
    )

    class Meta:
        model = Silence
        fields = ["rule", "subject_pattern", "topic_pattern", "starts_at", "ends_at", "reason"]

    def __init__(self, *args, now=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()
        if not self.is_bound and "ends_at" not in self.initial:
            self.initial["ends_at"] = _local_minute(self.now + timedelta(hours=2))

    def clean_subject_pattern(self) -> str:
        return clean_pattern(self.cleaned_data.get("subject_pattern", ""))

    def clean_topic_pattern(self) -> str:
        return clean_pattern(self.cleaned_data.get("topic_pattern", ""))

    def clean_starts_at(self):
        starts_at = self.cleaned_data.get("starts_at")
        if starts_at is not None and starts_at - self.now > MAX_SILENCE_START:
            raise ValidationError(LATE_START)
        return silence_start(starts_at, self.now)

    def clean_reason(self) -> str:
        reason = (self.cleaned_data.get("reason") or "").strip()
        if not reason:
            raise ValidationError("Say why it is silenced.")
        return reason

    def clean(self) -> dict:
        data = super().clean()
        ends_at, starts_at = data.get("ends_at"), data.get("starts_at")
        if ends_at is None or starts_at is None:
            return data
        problem = silence_problem(starts_at, ends_at, self.now)
        if problem is not None:
            self.add_error(*problem)
        return data


class TestEmailForm(forms.Form):
    recipients = forms.CharField(
        max_length=10_000,
        widget=forms.TextInput(attrs={"spellcheck": "false", "autocomplete": "email"}),
        help_text="One or more addresses, separated by commas or spaces.",
    )

    def clean_recipients(self) -> list[str]:
        addresses = parse_recipients(self.cleaned_data.get("recipients", ""))
        if not addresses:
            raise ValidationError("Give at least one address.")
        return addresses
