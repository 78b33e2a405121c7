"""``{% group_status_explained metrics %}``: why a group has its status, since when, the
messages retention took from it, and a legend of Burrow's statuses (the group page)."""

from __future__ import annotations

from django import template

from console.monitoring.current import status_since
from console.monitoring.metrics import GroupMetrics

register = template.Library()

#: Each status, as the legend says it (console/monitoring/status.py has the rules).
LEGEND = [
    ("OK", "no lag, or lag zero at a commit of the window, or the lag decreased within it"),
    ("WARN", "the offset moves but the lag never decreased over the window (slow consumer)"),
    ("STALL", "commits go on but the offset never moved over the window, with lag (ERR)"),
    (
        "STOP",
        "no commit for longer than the window's span, with lag throughout (ERR); also "
        "a consumer that stopped right after catching up (Tidemark's rule)",
    ),
    ("REWIND", "the committed offset went backwards within the window (ERR)"),
]


@register.inclusion_tag("monitoring/_status_reason.html")
def group_status_explained(metrics: GroupMetrics | None) -> dict:
    if metrics is None:
        return {"metrics": None, "legend": LEGEND}
    lost = [q for q in metrics.queues if q.lost]
    return {
        "metrics": metrics,
        "since_ms": status_since(metrics.group, metrics.status),
        "lost_queues": lost,
        "legend": LEGEND,
    }
