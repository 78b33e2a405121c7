"""Big topics: those with too many queues to read every one per page or per sample.

A topic with more than ``TIDEMARK_BIG_TOPIC_QUEUES`` queues (default 10,000) is *big*:
pages page its queues and take its totals (messages, last write, each group's lag) from
the latest sample, labelled with the sample's age; the sampler reads it in chunks of
``TIDEMARK_SAMPLE_CHUNK_QUEUES`` queues, at most ``TIDEMARK_SAMPLE_QUEUE_BUDGET`` queues
of big topics per sample, stalest chunk first (see sampler.py and docs/OPERATIONS.md).
Each is a setting in console/settings.py, overridable by the environment variable of the
same name.
"""

from __future__ import annotations

from django.conf import settings

from console.monitoring.models import GroupSample, StoreSample, TopicSample
from storeadapter.engine import TopicInfo
from storeadapter.summaries import SampledLag, SampledTopic

DEFAULT_BIG_TOPIC_QUEUES = 10_000
DEFAULT_QUEUE_BUDGET = 250_000
DEFAULT_CHUNK_QUEUES = 10_000


def _setting(name: str, default: int) -> int:
    return max(1, int(getattr(settings, name, default)))


def big_topic_queues() -> int:
    """Topics with more queues than this are big."""
    return _setting("TIDEMARK_BIG_TOPIC_QUEUES", DEFAULT_BIG_TOPIC_QUEUES)


def queue_budget() -> int:
    """The most queues of big topics one sample reads."""
    return _setting("TIDEMARK_SAMPLE_QUEUE_BUDGET", DEFAULT_QUEUE_BUDGET)


def chunk_queues() -> int:
    """Queues per chunk of a big topic (the unit the sampler reads and sums)."""
    return _setting("TIDEMARK_SAMPLE_CHUNK_QUEUES", DEFAULT_CHUNK_QUEUES)


def is_big(info: TopicInfo) -> bool:
    return info.queues > big_topic_queues()


class SampledFigures:
    """``storeadapter.summaries.Figures`` from the latest sample's rows, each row read at
    most once per object (make one per request)."""

    def __init__(self) -> None:
        self._latest: StoreSample | None | bool = False
        self._topics: dict[str, SampledTopic | None] = {}
        self._lags: dict[tuple[str, str], SampledLag | None] | None = None

    def is_big(self, info: TopicInfo) -> bool:
        return is_big(info)

    def latest_ms(self) -> int | None:
        if self._latest is False:
            self._latest = StoreSample.objects.order_by("-ts_ms").first()
        return self._latest.ts_ms if self._latest else None  # type: ignore[union-attr]

    def topic(self, name: str) -> SampledTopic | None:
        if name not in self._topics:
            self._topics[name] = _sampled_topic(name)
        return self._topics[name]

    def group_lag(self, group: str, topic: str) -> SampledLag | None:
        if self._lags is None:
            self._lags = {}
            ts_ms = self.latest_ms()
            if ts_ms is not None:
                rows = GroupSample.objects.filter(ts_ms=ts_ms, aggregated=True).values_list(
                    "group", "topic", "lag", "queues_behind"
                )
                for name, on, lag, behind in rows:
                    self._lags[(name, on)] = SampledLag(lag, behind, ts_ms)
        return self._lags.get((group, topic))


def _sampled_topic(name: str) -> SampledTopic | None:
    """The topic's totals from the newest sample that has it."""
    row = topic_sample(name)
    if row is None:
        return None
    queues = row.queue_count
    return SampledTopic(
        row.messages, row.last_write_ms, row.ts_ms, row.sampled_queues or queues, queues
    )


def topic_sample(name: str) -> TopicSample | None:
    """The newest sample row of the topic, without its per-queue lists."""
    return TopicSample.objects.filter(topic=name).order_by("-ts_ms").defer("max_offsets").first()
