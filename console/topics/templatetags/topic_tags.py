"""Template helpers for the topic pages: `{% load topic_tags %}`."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

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
    return utc_time(when)


@register.simple_tag
def utc_time(when: datetime | None, empty: str = "—") -> str:
    """A moment as ``<time>`` in the console's one time format, "2026-05-01 12:34:56 UTC"
    (aware datetimes are converted to UTC), or `empty` when None."""
    if when is None:
        return empty
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    if when.year < 1000:  # strftime's year is not padded to four digits
        return format_html(
            '<time datetime="{}">{}</time>',
            when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            when.strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    # Digits and separators only, nothing to escape; the shown time is the ISO one's date
    # and seconds (a list of 50 rows calls this 50 times: no strftime, no format_html).
    iso = when.isoformat(timespec="milliseconds")
    return mark_safe(
        f'<time datetime="{iso.replace("+00:00", "Z")}">{iso[:10]} {iso[11:19]} UTC</time>'
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


#: What each Burrow-style status says, for the badges' tooltips and the legends (the rules
#: over a window of a queue's last commits: DESIGN.md, console/monitoring/status.py).
STATUS_MEANINGS = {
    "OK": "keeping up: lag within what is allowed, or coming down",
    "WARN": "falling behind: lag above 0 and not decreasing over the window",
    "ERR": "a queue is stalled, stopped or rewound",
    "STALL": "commits go on but the offset does not move, with lag above 0",
    "STOP": "no commit for longer than the window's span",
    "REWIND": "the committed offset went backwards",
}


@register.simple_tag
def status_badge(status: str | None) -> str:
    """A group's or queue's Burrow status as a badge with its meaning as a tooltip; "not
    sampled" before the first sample (monitoring/_status.jinja, also a Jinja row's
    ``status_badge``). The same for every row of a status: rendered once per status."""
    return _badge(status or None)


@lru_cache(maxsize=32)
def _badge(status: str | None) -> str:
    from console.core.jinja import environment

    return mark_safe(
        environment()
        .get_template("monitoring/_status.jinja")
        .render(status=status, meaning=STATUS_MEANINGS.get(status or "", ""))
    )


@register.inclusion_tag("monitoring/_status_legend.html")
def status_legend(*statuses: str) -> dict:
    """A legend of the statuses given (every one when none is), badge beside meaning."""
    names = statuses or tuple(STATUS_MEANINGS)
    return {"rows": [(name, STATUS_MEANINGS[name]) for name in names]}
