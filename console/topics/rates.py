"""Each topic's produce rate (messages per second), from the monitoring samples.

The rate is measured between the latest sample and the one the monitoring measures every
rate from (``console.monitoring.current``: the oldest within the rate window); nothing here
opens the store. A topic sampled once only has no rate yet (absent from the answer).
"""

from __future__ import annotations

from console.monitoring import current
from console.monitoring import lag as lagmath
from console.monitoring.models import TopicSample


def topic_produce_rates() -> dict[str, float]:
    """Topic name → messages appended per second over the rate window."""
    latest, start = current.latest_two()
    if latest is None or start is None:
        return {}
    fields = ("topic", "appended", "ts_ms")
    now = TopicSample.objects.filter(ts_ms=latest.ts_ms).values_list(*fields)
    then = {
        topic: (appended, ts_ms)
        for topic, appended, ts_ms in TopicSample.objects.filter(ts_ms=start.ts_ms).values_list(
            *fields
        )
    }
    return {
        topic: lagmath.rate(then[topic][0], then[topic][1], appended, ts_ms)
        for topic, appended, ts_ms in now
        if topic in then
    }
