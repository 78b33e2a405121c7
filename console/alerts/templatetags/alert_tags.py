"""The alert pages' tags: ``{% monitoring_freshness %}`` (a banner on the dashboard when the
monitoring is stale), ``{{ queue|queue_text }}`` (an event's queue, as the mail says it) and
``{% clipped text %}`` (a long name shortened, whole in its title)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

from console.alerts import render
from console.alerts.freshness import UNREAD, monitoring_health

register = template.Library()

#: Longer names are cut on the pages' tables (the whole stays in the title).
CLIP_CHARS = 40


@register.inclusion_tag("alerts/_freshness.html")
def monitoring_freshness(latest_ms: Any = UNREAD) -> dict:
    """The banner; ``latest_ms``: the newest sample's time (None: no sample) when the
    page has read it already."""
    return {"health": monitoring_health(latest_ms=latest_ms)}


@register.filter
def queue_text(queue: dict[str, Any]) -> str:
    return render.queue_text(queue)


@register.simple_tag
def clipped(text: Any, limit: int = CLIP_CHARS) -> str:
    """``text`` as it is, or cut to ``limit`` characters with the whole in a title."""
    text = str(text)
    if len(text) <= limit:
        return format_html("{}", text)
    return format_html('<span title="{}">{}…</span>', text, text[: limit - 1])
