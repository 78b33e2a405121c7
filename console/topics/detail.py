"""A topic's read models beyond the list's row (``ListedTopic``): its detail, a queue
after a freeze or unfreeze, its settings. The API answers them through
console/api/read_models/topics.py; the CLI's ``topic-settings --json`` prints the settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.monitoring import scale
from storeadapter.engine import TOPIC_SETTINGS, MessageStore, QueueNotFoundError
from storeadapter.summaries import QueueRow, TopicSummary, queue_rows, topic_summaries
from storeadapter.topic_kinds import kind_of

#: Queues listed in a topic's detail; the API's ``queues/`` pages through all of them.
DETAIL_QUEUES = 1024


@dataclass(frozen=True)
class TopicDetail:
    """A topic: its summary's figures (read through, as ``ListedTopic``'s), kind, layout,
    how many queues the sample read (None when the figures are live) and its first
    ``DETAIL_QUEUES`` queues."""

    summary: TopicSummary
    kind: str
    layout: str
    sampled_queues: int | None
    queue_list: list[QueueRow]

    def __getattr__(self, name: str):
        if name == "summary":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.summary, name)


def topic_detail(store: MessageStore, topic: str) -> TopicDetail:
    info = store.topic(topic)
    figures = scale.SampledFigures()
    summary = topic_summaries(store, [topic], figures)[0]
    sampled = figures.topic(topic) if figures.is_big(info) else None
    return TopicDetail(
        summary,
        kind_of(info),
        info.layout,
        sampled.sampled_queues if sampled else None,
        queue_rows(store, topic, 0, DETAIL_QUEUES),
    )


def queue_row(store: MessageStore, topic: str, queue: int) -> QueueRow:
    rows = queue_rows(store, topic, queue, 1)
    if not rows:
        raise QueueNotFoundError(f"topic {topic!r} has no queue {queue}")
    return rows[0]


@dataclass(frozen=True)
class QueueAction:
    """A queue after a freeze or an unfreeze: its row (read through) and whether the
    action changed it."""

    row: QueueRow
    changed: bool

    def __getattr__(self, name: str):
        if name == "row":
            raise AttributeError(name)
        return getattr(self.row, name)


@dataclass(frozen=True)
class SettingValue:
    """One setting of a topic: the value in force, the topic's own (None: the store's
    default), the store's default, the unit."""

    name: str
    value: int | float
    own: int | None
    default: int | float
    unit: str


@dataclass(frozen=True)
class TopicSettings:
    """A topic's settings, one per setting of the engine's table (``TOPIC_SETTINGS``),
    in its order."""

    topic: str
    settings: list[SettingValue]

    @property
    def by_name(self) -> dict[str, SettingValue]:
        return {s.name: s for s in self.settings}


def topic_settings(store: MessageStore, topic: str) -> TopicSettings:
    own = store.topic(topic).settings
    values = store.topic_settings(topic)
    return TopicSettings(
        topic,
        [
            SettingValue(s.name, values[s.name], own.get(s.name), s.default(store.config), s.unit)
            for s in TOPIC_SETTINGS
        ],
    )
