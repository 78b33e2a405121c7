"""Searching and sorting the topic list, for the page and the API alike."""

from __future__ import annotations

from collections.abc import Callable

from storeadapter.summaries import TopicSummary

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


def search_and_sort(
    summaries: list[TopicSummary], query: str = "", sort: str = DEFAULT_SORT
) -> list[TopicSummary]:
    """The topics whose name contains ``query`` (any case), in ``sort`` order."""
    if query:
        needle = query.casefold()
        summaries = [t for t in summaries if needle in t.name.casefold()]
    _, key, reverse_order = SORTS.get(sort, SORTS[DEFAULT_SORT])
    return sorted(summaries, key=key, reverse=reverse_order)
