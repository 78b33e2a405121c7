from datetime import date, datetime, time, timedelta

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from console.audit.models import AuditEntry
from console.core.bounds import BoundedDateField


class AuditFilterForm(forms.Form):
    """The /audit/ filters, read from the query string. Every field is optional."""

    action = forms.CharField(
        required=False,
        max_length=64,
        help_text='Exact, or a prefix ending in "." such as "topic."',
    )
    user = forms.CharField(required=False, max_length=150, label="User")
    target = forms.CharField(required=False, max_length=200, label="Target contains")
    date_from = BoundedDateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    date_to = BoundedDateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("date_from"), cleaned.get("date_to")
        if start and end and start > end:
            self.add_error("date_to", "The end date is before the start date.")
        return cleaned

    def filter(self, entries: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        """`entries` narrowed by the cleaned filters; call only when the form is valid."""
        data = self.cleaned_data
        action = data.get("action", "").strip()
        if action.endswith("."):
            entries = entries.filter(action__startswith=action)
        elif action:
            entries = entries.filter(action=action)
        if user := data.get("user", "").strip():
            entries = entries.filter(username__iexact=user)
        if target := data.get("target", "").strip():
            entries = entries.filter(target__icontains=target)
        if start := data.get("date_from"):
            entries = entries.filter(created_at__gte=_start_of(start))
        if end := data.get("date_to"):
            # The whole last day, in the console's time zone.
            entries = entries.filter(created_at__lt=_start_of(end + timedelta(days=1)))
        return entries


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))
