"""``{% monitoring_freshness %}``: a banner on the dashboard when the monitoring is stale."""

from __future__ import annotations

from django import template

from console.alerts.freshness import monitoring_health

register = template.Library()


@register.inclusion_tag("alerts/_freshness.html")
def monitoring_freshness() -> dict:
    return {"health": monitoring_health()}
