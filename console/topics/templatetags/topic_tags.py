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
