"""Bounds on dates and times that people type, so that arithmetic on them (the day after,
milliseconds since the epoch, a time zone's shift) cannot overflow: a date outside them is
a form error or a 400 that says the range, never a 500."""

from __future__ import annotations

from datetime import date

from django import forms
from django.core.exceptions import ValidationError

EARLIEST_DATE = date(1970, 1, 1)
#: A year short of datetime's end: the day after and a time zone's shift still fit.
LATEST_DATE = date(9998, 12, 31)


def date_in_range(value: date) -> None:
    """Validator: ``value`` (a date or a datetime) lies between the bounds."""
    day = value.date() if hasattr(value, "date") and callable(value.date) else value
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise ValidationError(
            f"Give a date between {EARLIEST_DATE:%Y-%m-%d} and {LATEST_DATE:%Y-%m-%d}.",
            code="date_out_of_range",
        )


class BoundedDateField(forms.DateField):
    """A form's date, between EARLIEST_DATE and LATEST_DATE."""

    default_validators = [date_in_range]


class BoundedDateTimeField(forms.DateTimeField):
    """A form's date and time, between EARLIEST_DATE and LATEST_DATE."""

    default_validators = [date_in_range]
