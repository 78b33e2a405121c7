"""Each topic's produce rate (messages per second) and size (bytes of the records it
holds), from the monitoring samples.

The rate is measured between the latest sample and the one the monitoring measures every
rate from (``console.monitoring.current``: the oldest within the rate window); nothing here
opens the store. A topic sampled once only has no rate yet (absent from the answer).
"""

from __future__ import annotations

from console.monitoring import current
from console.monitoring import lag as lagmath
from console.monitoring.models import StoreSample, TopicSample

Samples = tuple[StoreSample | None, StoreSample | None]


def topic_produce_rates(samples: Samples | None = None) -> dict[str, float]:
    """Topic name → messages appended per second over the rate window (between
    ``samples``, ``current.latest_two()`` unless given)."""
    latest, start = current.latest_two() if samples is None else samples
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


class SampledSizes(dict):
    """Topic name → bytes of the records it holds, as of the latest sample; None while the
    sampler is still counting the topic (console/monitoring/sizes.py). A topic the latest
    sample did not see (none yet, or created since) is absent."""

    def state(self, topic: str) -> str:
        """ "known", "counting" (sampled, count not caught up) or "unsampled"."""
        if topic not in self:
            return "unsampled"
        return "counting" if self[topic] is None else "known"


def topic_sizes(samples: Samples | None = None) -> SampledSizes:
    """``SampledSizes`` of the latest sample (of ``samples``, ``current.latest_two()``
    unless given)."""
    latest, _start = current.latest_two() if samples is None else samples
    if latest is None:
        return SampledSizes()
    rows = TopicSample.objects.filter(ts_ms=latest.ts_ms).values_list("topic", "size_bytes")
    return SampledSizes(rows)
