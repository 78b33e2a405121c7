"""Searching, filtering by kind and sorting the topic list, for the page and the API alike.

``SORTS`` read a ``TopicSummary`` (the API's rows); the page's rows (``ListedTopic``) also
carry the kind and the produce rate, and sort by those too (``PAGE_SORTS``). A group's
``%RETRY%`` topics are not ordinary topics: the page lists them only when asked
(``KIND_FILTERS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter

from storeadapter.summaries import TopicSummary
from storeadapter.topic_kinds import DLQ, KIND_LABELS, PLAIN, RETRY, STREAM

#: ``sort`` values: label, sort key, reversed. Numbers and times sort biggest/newest first.
SORTS: dict[str, tuple[str, Callable[[TopicSummary], tuple], bool]] = {
    "name": ("Name, A to Z", lambda t: (t.name,), False),
    "-name": ("Name, Z to A", lambda t: (t.name,), True),
    "queues": ("Most queues", lambda t: (-t.queues, t.name), False),
    "messages": ("Most messages", lambda t: (-t.messages, t.name), False),
    "last_write": (
        "Latest write",
        lambda t: (t.last_write_ms is None, -(t.last_write_ms or 0), t.name),
        False,
    ),
}
DEFAULT_SORT = "name"
#: Kinds in the order the kind sort lists them.
KIND_ORDER = (PLAIN, STREAM, RETRY, DLQ)


@dataclass(frozen=True)
class ListedTopic:
    """A row of the topics page and API: the summary's figures, the kind, the produce
    rate (messages per second; None before two samples) and the size (bytes of the
    records held, from the latest sample; None while unknown, ``size_state`` says why:
    "counting" or "unsampled")."""

    summary: TopicSummary
    kind: str
    produce_rate: float | None
    size_bytes: int | None = None
    size_state: str = "unsampled"

    def __getattr__(self, name: str):
        if name == "summary":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.summary, name)

    @property
    def kind_label(self) -> str:
        return KIND_LABELS[self.kind]


# The summary's fields read through as properties of the row: the page's row template reads
# about 15 of them a row, and each would otherwise miss the instance and go through
# ``__getattr__`` (a failed look-up and a Python call). ``__getattr__`` stays for the rest.
for _field in fields(TopicSummary):
    if not hasattr(ListedTopic, _field.name):
        setattr(ListedTopic, _field.name, property(attrgetter(f"summary.{_field.name}")))
del _field


#: The page's (and the API's list) sorts: the summary's, and kind, produce rate and size.
PAGE_SORTS: dict[str, tuple[str, Callable, bool]] = {
    **SORTS,
    "kind": ("Kind", lambda t: (KIND_ORDER.index(t.kind), t.name), False),
    "produce_rate": (
        "Highest produce rate",
        lambda t: (t.produce_rate is None, -(t.produce_rate or 0.0), t.name),
        False,
    ),
    "size": (
        "Largest size",
        lambda t: (t.size_bytes is None, -(t.size_bytes or 0), t.name),
        False,
    ),
}
#: ``kind`` filter values of the page: label, kinds listed. The default leaves out the
#: groups' retry topics, which only their consumers read.
KIND_FILTERS: dict[str, tuple[str, frozenset[str]]] = {
    "": ("Ordinary topics and DLQs", frozenset({PLAIN, STREAM, DLQ})),
    PLAIN: ("Plain", frozenset({PLAIN})),
    STREAM: ("Stream", frozenset({STREAM})),
    DLQ: ("DLQ", frozenset({DLQ})),
    RETRY: ("Groups' retry topics", frozenset({RETRY})),
    "all": ("Every kind", frozenset(KIND_ORDER)),
}


def search_and_sort(
    summaries: list, query: str = "", sort: str = DEFAULT_SORT, sorts: dict | None = None
) -> list:
    """The topics whose name contains ``query`` (any case), in ``sort`` order (of ``sorts``,
    by default ``SORTS``)."""
    table = SORTS if sorts is None else sorts
    if query:
        needle = query.casefold()
        summaries = [t for t in summaries if needle in t.name.casefold()]
    _, key, reverse_order = table.get(sort, table[DEFAULT_SORT])
    return sorted(summaries, key=key, reverse=reverse_order)
