"""Template helpers for the topic pages: `{% load topic_tags %}`."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

register = template.Library()


@register.simple_tag
def ms_time(value: int | None, empty: str = "—") -> str:
    """A store time in epoch milliseconds as ``<time>`` in UTC, or `empty` when None."""
    if value is None:
        return empty
    try:
        when = datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return empty
    return format_html(
        '<time datetime="{}">{}</time>',
        when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        when.strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


@register.filter
def num(value: object) -> str:
    """A whole number with thousands separators (12,345), the console's one number format;
    anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    return f"{value:,}"


@register.filter
def duration(seconds: float | None, empty: str = "—") -> str:
    """Seconds as people say them: "45 s", "3 min 5 s", "2 h 10 min", "3 d 4 h"."""
    if seconds is None:
        return empty
    try:
        total = max(0, round(float(seconds)))
    except (TypeError, ValueError, OverflowError):
        return empty
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


@register.inclusion_tag("monitoring/_status.html")
def status_badge(status: str | None) -> dict:
    """A group's or queue's Burrow status as a badge; "not sampled" before the first sample."""
    return {"status": status}
