"""``ListedTopic`` reads its summary's fields through, as attributes of its own (the topics
page's rows read about 15 of them a row), without a trip through ``__getattr__``."""

from __future__ import annotations

import dataclasses
import pickle

from console.topics.listing import ListedTopic
from storeadapter.summaries import TopicSummary

SUMMARY = TopicSummary("orders", 4, 1, 1234, 1_764_000_000_000, 1_763_000_000_000, None)


def test_a_listed_topic_answers_every_field_of_its_summary(monkeypatch):
    missed = []
    fallback = ListedTopic.__getattr__

    def recorded(self, name):
        missed.append(name)
        return fallback(self, name)

    monkeypatch.setattr(ListedTopic, "__getattr__", recorded)
    row = ListedTopic(SUMMARY, "plain", 2.5, 100, "known")

    for field in dataclasses.fields(TopicSummary):
        assert getattr(row, field.name) == getattr(SUMMARY, field.name)
    assert missed == []


def test_a_listed_topic_keeps_its_own_fields_equality_and_pickling():
    row = ListedTopic(SUMMARY, "stream", None)

    assert (row.kind, row.kind_label, row.produce_rate, row.size_state) == (
        "stream",
        "stream",
        None,
        "unsampled",
    )
    assert [f.name for f in dataclasses.fields(ListedTopic)] == [
        "summary",
        "kind",
        "produce_rate",
        "size_bytes",
        "size_state",
    ]
    assert pickle.loads(pickle.dumps(row)) == row
    assert dataclasses.replace(row, kind="plain").name == "orders"
