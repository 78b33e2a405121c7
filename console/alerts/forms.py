"""The alert pages' forms: rules (admins), silences (operators), the test email (admins)."""

from __future__ import annotations

import re
from datetime import timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from console.alerts.models import MAX_PATTERN_LENGTH, AlertRule, Silence, compile_pattern

#: The most addresses a rule (or a test email) may mail.
MAX_RECIPIENTS = 50
#: The longest for-duration and repeat interval: a week, and 30 days.
MAX_FOR_SECONDS = 7 * 86400
MAX_REPEAT_SECONDS = 30 * 86400
#: The shortest repeat interval (0 turns reminders off).
MIN_REPEAT_SECONDS = 60
#: The longest silence.
MAX_SILENCE = timedelta(days=90)
#: The largest threshold accepted for counts and durations.
MAX_THRESHOLD = 1e15


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
        label="For (seconds)",
        min_value=0,
        max_value=MAX_FOR_SECONDS,
        initial=0,
        help_text="How long the condition must hold before the rule fires; 0 fires at once.",
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
    recipients = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Email addresses, one a line; empty records events without mail.",
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
            "recipients",
        ]
        labels = {
            "kind": "Condition",
            "group_pattern": "Group regex",
            "topic_pattern": "Topic regex",
        }
        help_texts = {
            "group_pattern": "Matched against the whole group name; empty: any group.",
            "topic_pattern": "The group must consume a matching topic; lag and status are "
            "then taken over those topics' queues. Empty: any topic.",
        }
        widgets = {
            "name": forms.TextInput(attrs={"autocomplete": "off"}),
            "group_pattern": forms.TextInput(attrs={"spellcheck": "false"}),
            "topic_pattern": forms.TextInput(attrs={"spellcheck": "false"}),
        }

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
                    "Disk use is store-wide: choose all groups and leave the regexes empty.",
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
        if kind in AlertRule.STATUS_KINDS:
            data["threshold"] = None
        elif kind and not self.has_error("threshold"):
            if threshold is None:
                self.add_error("threshold", "This condition needs a threshold.")
            elif kind == AlertRule.DISK_RATIO:
                if not 0 < threshold < 1:
                    self.add_error("threshold", "A disk use ratio between 0 and 1, such as 0.8.")
            elif kind == AlertRule.EXPIRY_HOURS:
                if not 0 < threshold <= MAX_THRESHOLD:
                    self.add_error("threshold", "A number of hours above 0.")
            elif not 0 <= threshold <= MAX_THRESHOLD:
                self.add_error("threshold", "A number of 0 or more.")
        return data


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
        label="Subject regex",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
        help_text='Matched against the whole group name (or "store" for disk); empty: all.',
    )
    ends_at = forms.DateTimeField(
        label="Ends at",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="In the console's time zone; at most 90 days ahead.",
    )
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why it is silenced, for the others on call.",
    )

    class Meta:
        model = Silence
        fields = ["rule", "subject_pattern", "ends_at", "reason"]

    def __init__(self, *args, now=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()
        if not self.is_bound and "ends_at" not in self.initial:
            self.initial["ends_at"] = _local_minute(self.now + timedelta(hours=2))

    def clean_subject_pattern(self) -> str:
        return clean_pattern(self.cleaned_data.get("subject_pattern", ""))

    def clean_reason(self) -> str:
        reason = (self.cleaned_data.get("reason") or "").strip()
        if not reason:
            raise ValidationError("Say why it is silenced.")
        return reason

    def clean_ends_at(self):
        ends_at = self.cleaned_data["ends_at"]
        if ends_at <= self.now:
            raise ValidationError("The end must be in the future.")
        if ends_at - self.now > MAX_SILENCE:
            raise ValidationError("A silence lasts at most 90 days.")
        return ends_at


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
