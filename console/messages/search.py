"""The searches behind /messages/ and /api/v1/messages/, each bounded: none scans without
a limit.

The search logic is here once, for the console page and the API alike: `key_page`,
`range_span` + `read_span` and `time_page` return plain messages and numbers (exports of
them are console.messages.exports'). The console's `by_*` functions wrap them into
`Results` for the page. Engine errors (`StoreError`) are left to the caller: the page
shows their sentence on the form, the API answers them as 4xx.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.urls import reverse

from console.messages import bodies
from console.messages.forms import MODE_FILTER, MODE_ID, MODE_KEY, MODE_RANGE, MODE_TIME
from storeadapter.engine import MessageStore, StoredMessage, filters

#: Messages a page of a queue range shows.
RANGE_PAGE = 500
#: Messages a page of a key search shows, and the most a key search reaches.
KEY_PAGE = 100
KEY_MAX = 10_000
#: Messages read from each queue by a search by time, and the most shown in all.
TIME_PER_QUEUE = 20
TIME_SHOWN = 500
#: Queues a page of the per-queue table of a search by time lists.
QUEUE_TABLE_PAGE = 100
#: Messages one export holds by default, and how many are read at a time.
EXPORT_MAX = 10_000
EXPORT_CHUNK = 500
#: Matches a page of a filter scan shows.
FILTER_PAGE = 100
#: The most messages a search by time over all queues (the API's) reaches.
TIME_MAX = 10_000


class Row(NamedTuple):
    """A message as a results table shows it."""

    message: StoredMessage
    stored: datetime
    stored_text: str
    preview: str


def row(message: StoredMessage) -> Row:
    return Row(
        message,
        bodies.store_time(message.store_time_ms),
        bodies.readable_time(message.store_time_ms),
        bodies.preview(message.body),
    )


@dataclass
class KeyPage:
    """A page of a key search: newest first, without a total (the index is not counted)."""

    number: int
    more: bool
    #: Unknown without a count: the pager says "Page N" and offers no "Last".
    paginator = None

    def has_previous(self) -> bool:
        return self.number > 1

    def has_next(self) -> bool:
        return self.more

    def has_other_pages(self) -> bool:
        return self.has_previous() or self.has_next()

    def previous_page_number(self) -> int:
        return self.number - 1

    def next_page_number(self) -> int:
        return self.number + 1


@dataclass
class QueueStart:
    """Where a search by time starts in one queue."""

    queue: int
    offset: int
    end: int
    browse_url: str


@dataclass
class Results:
    """What a search found, and what to say about it."""

    mode: str
    rows: list[Row] = field(default_factory=list)
    summary: str = ""
    #: Sentences about clamping and limits, shown above the table.
    notes: list[str] = field(default_factory=list)
    #: A Django `Page` (queue range) or a `KeyPage`; None when the results are one list.
    page: Page | KeyPage | None = None
    export_url: str = ""
    export_label: str = ""
    queue_starts: list[QueueStart] = field(default_factory=list)
    #: The page of the per-queue table shown (search by time).
    queue_table: Page | None = None
    #: A filter scan that stopped before the end: the page that goes on from there.
    continue_url: str = ""


def page_number(value: Any) -> int:
    """A page number from the query string: an integer ≥ 1 (1 when it is not one)."""
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def range_url(topic: str, queue: int, start: int | None = None, end: int | None = None) -> str:
    """The search page listing a queue range."""
    query: dict[str, Any] = {"mode": MODE_RANGE, "topic": topic, "queue": queue}
    if start is not None:
        query["from"] = start
    if end is not None:
        query["to"] = end
    return f"{reverse('messages:search')}?{urlencode(query)}"


def key_url(topic: str, key: str) -> str:
    """The search page listing the messages of a topic with a key."""
    query = urlencode({"mode": MODE_KEY, "topic": topic, "key": key})
    return f"{reverse('messages:search')}?{query}"


class Found(NamedTuple):
    """One page of a bounded search."""

    messages: list[StoredMessage]
    #: The page shown (a page past the last may have been moved back to the last).
    number: int
    has_next: bool
    #: How many messages the search found in all, when that is known.
    total: int | None
    #: Whether the search stopped at its limit (more may match than it reaches).
    capped: bool


def _page_of(found: list[StoredMessage], number: int, size: int, wanted: int, limit: int) -> Found:
    """Page `number` of `size` of `found`: the first `wanted` matches of a search that
    reaches `limit` at most (or all of them, when fewer came back)."""
    return Found(
        found[(number - 1) * size : number * size],
        number,
        len(found) > number * size,
        len(found) if len(found) < wanted else None,
        len(found) >= limit,
    )


def key_page(
    store: MessageStore,
    topic: str,
    key: str,
    begin_ms: int | None,
    end_ms: int | None,
    number: int,
    size: int,
    clamp: bool = False,
) -> Found:
    """Page `number` (of `size`) of the messages of `topic` with `key`, newest first.

    Reads through the key index up to the end of that page (one more, to know whether
    there is a next), at most KEY_MAX in all. With `clamp`, a page past the last shows
    the last.
    """
    wanted = min(number * size + 1, KEY_MAX)
    found = store.query_by_key(topic, key, begin_ms, end_ms, wanted)
    if clamp:
        number = min(number, max(1, -(-len(found) // size)))
    return _page_of(found, number, size, wanted, KEY_MAX)


class Span(NamedTuple):
    """The offsets of a queue range a search reads, clamped to what the queue holds."""

    low: int
    high: int
    #: Offsets first ≤ o < last.
    first: int
    last: int
    #: Sentences about the clamping, for people.
    notes: list[str]

    @property
    def count(self) -> int:
        return self.last - self.first


def range_span(
    store: MessageStore, topic: str, queue: int, start: int | None, end: int | None
) -> Span:
    """Offsets `start` up to `end` (not included) of a queue, clamped to its readable
    range (`start` and `end` default to its first and end offsets)."""
    low, high = store.queue_range(topic, queue)
    notes = []
    first = low if start is None else start
    if first < low:
        notes.append(
            f"Offset {first:,} is before the first readable offset of queue {queue}; "
            f"starting at {low:,} (older messages were removed by retention)."
        )
        first = low
    if first > high:
        notes.append(
            f"Offset {first:,} is past the end of queue {queue}; "
            f"the next message will get offset {high:,}."
        )
        first = high
    last = high if end is None else end
    if last > high:
        notes.append(
            f"Queue {queue} ends before offset {last:,}; "
            f"showing up to its end, {high:,} (not included)."
        )
        last = high
    return Span(low, high, first, max(first, last), notes)


def read_span(store: MessageStore, topic: str, queue: int, offsets: range) -> list[StoredMessage]:
    """The messages at `offsets` of a queue (at most len(offsets), one read)."""
    if not offsets:
        return []
    read = store.read_result(topic, queue, offsets.start, len(offsets))
    return [m for m in read.messages if m.queue_offset < offsets.stop]


def _oldest_first(message: StoredMessage) -> tuple[int, int]:
    return (message.store_time_ms, message.commit_offset)


def queue_since(
    store: MessageStore,
    topic: str,
    queue: int,
    since_ms: int,
    until_ms: int | None,
    chunk: int,
    most: int = EXPORT_CHUNK,
) -> Iterator[StoredMessage]:
    """The messages of one queue stored from `since_ms` to `until_ms` (both included),
    oldest first, read lazily in chunks that double from `chunk` up to `most` (an export
    merging many queues keeps each at `chunk`: `most=chunk`)."""
    position = store.offset_for_time(topic, queue, since_ms)
    while True:
        read = store.read_result(topic, queue, position, chunk)
        for message in read.messages:
            if until_ms is not None and message.store_time_ms > until_ms:
                return
            yield message
        if read.next_offset <= position or read.next_offset >= read.max_offset:
            return
        position = read.next_offset
        chunk = min(chunk * 2, most)


def _merged(streams: list[Iterator[StoredMessage]], wanted: int) -> list[StoredMessage]:
    """The first `wanted` messages of per-queue streams, merged oldest first."""
    return list(itertools.islice(heapq.merge(*streams, key=_oldest_first), wanted))


def time_page(
    store: MessageStore,
    topic: str,
    since_ms: int | None,
    until_ms: int | None,
    number: int,
    size: int,
    queues: range,
) -> Found:
    """Page `number` (of `size`) of the messages of `queues` of `topic` stored from
    `since_ms` to `until_ms` (both included, either may be None), merged oldest first.

    Each queue is read lazily from its first offset at `since_ms`, so no queue gives
    more than the end of that page (one more, to know whether there is a next), and the
    search reaches TIME_MAX messages at most. `queues` comes from
    `console.messages.time_queues.time_queues`, which bounds how many there are.
    """
    wanted = min(number * size + 1, TIME_MAX)
    chunk = max(1, min(EXPORT_CHUNK, -(-wanted // max(1, len(queues)))))
    streams = [queue_since(store, topic, q, since_ms or 0, until_ms, chunk) for q in queues]
    return _page_of(_merged(streams, wanted), number, size, wanted, TIME_MAX)


def export_filename(topic: str, queue: int, first: int, last: int) -> str:
    """The file name an export is downloaded as: safe characters only."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{topic}-queue{queue}-{first}-{last}.jsonl")


def by_id(store: MessageStore, message_id: str) -> Results:
    message = store.get(message_id)
    return Results(MODE_ID, [row(message)], summary=f"Message {message.message_id}.")


def by_key(
    store: MessageStore,
    topic: str,
    key: str,
    begin_ms: int | None,
    end_ms: int | None,
    number: int,
) -> Results:
    """A page of the messages of `topic` with `key`, newest first (at most KEY_MAX in all)."""
    number = min(number, KEY_MAX // KEY_PAGE)
    found = key_page(store, topic, key, begin_ms, end_ms, number, KEY_PAGE, clamp=True)
    shown, number = found.messages, found.number
    results = Results(MODE_KEY, [row(m) for m in shown], page=KeyPage(number, found.has_next))
    if shown:
        first = (number - 1) * KEY_PAGE + 1
        results.summary = (
            f"Messages {first:,} to {first + len(shown) - 1:,} with key “{key}” "
            f"in topic {topic}, newest first."
        )
    if found.capped:
        results.notes.append(
            f"A key search reaches the newest {KEY_MAX:,} messages only; "
            "narrow the time range to see older ones."
        )
    return results


def by_range(
    store: MessageStore,
    topic: str,
    queue: int,
    start: int | None,
    end: int | None,
    number: int,
) -> Results:
    """A page of RANGE_PAGE offsets of one queue, from `start` up to `end` (not included).

    Offsets outside the queue's readable range are clamped to it, and the results say so.
    """
    span = range_span(store, topic, queue, start, end)
    low, high, first, last = span.low, span.high, span.first, span.last
    page = Paginator(range(first, last), RANGE_PAGE).get_page(number)
    offsets: range = page.object_list
    messages = read_span(store, topic, queue, offsets)
    results = Results(MODE_RANGE, [row(m) for m in messages], notes=span.notes, page=page)
    if offsets:
        results.summary = (
            f"Queue {queue} of topic {topic}, offsets {offsets.start:,} to {offsets.stop - 1:,}"
        )
        if page.paginator.num_pages > 1:
            results.summary += f" (of {first:,} to {last - 1:,})"
        results.summary += f". Readable offsets are {low:,} to {high - 1:,}."
    elif low == high:
        results.summary = f"Queue {queue} of topic {topic} holds no messages."
    if last > first:
        query = urlencode({"topic": topic, "queue": queue, "from": first, "to": last})
        results.export_url = f"{reverse('messages:export')}?{query}"
        results.export_label = f"offsets {first:,} to {last - 1:,}"
    return results


def by_time(
    store: MessageStore, topic: str, at_ms: int, queues: range, table_page: int = 1
) -> Results:
    """The first TIME_PER_QUEUE messages of each of `queues` stored at or after `at_ms`,
    merged oldest first, TIME_SHOWN at most; and page `table_page` of where the search
    starts in each queue (QUEUE_TABLE_PAGE queues a page).

    Queues are read lazily, a few messages at a time: the work is bounded by the number of
    queues (see `console.messages.time_queues`) and TIME_SHOWN, not by what they hold.
    """
    chunk = max(1, min(TIME_PER_QUEUE, -(-(TIME_SHOWN + 1) // max(1, len(queues)))))
    streams = [
        itertools.islice(queue_since(store, topic, q, at_ms, None, chunk), TIME_PER_QUEUE)
        for q in queues
    ]
    messages = _merged(streams, TIME_SHOWN + 1)
    table = Paginator(queues, QUEUE_TABLE_PAGE).get_page(table_page)
    starts = []
    for queue in table.object_list:
        offset = store.offset_for_time(topic, queue, at_ms)
        end = store.queue_range(topic, queue)[1]
        starts.append(QueueStart(queue, offset, end, range_url(topic, queue, offset)))
    results = Results(MODE_TIME, queue_starts=starts, queue_table=table)
    queue_count = store.topic(topic).queues
    results.rows = [row(m) for m in messages[:TIME_SHOWN]]
    when = bodies.readable_time(at_ms)
    if messages:
        which = (
            f"each of the {len(queues):,} queues"
            if queues.start == 0 and len(queues) == queue_count
            else f"each of queues {queues.start:,} to {queues.stop - 1:,}"
        )
        results.summary = (
            f"Up to {TIME_PER_QUEUE} messages from {which} of "
            f"topic {topic}, stored at or after {when} UTC, oldest first."
        )
    if len(messages) > TIME_SHOWN:
        results.notes.append(
            f"Showing the first {TIME_SHOWN} messages found; "
            "browse a queue from its starting offset (below) to see more."
        )
    return results


#: Why a filter scan stopped, as the page says it.
_STOPPED = {
    "matches": "it found a page of matches",
    "records": "it looked at its budget of records",
    "seconds": "it used its time budget",
}


def by_filter(store: MessageStore, topic: str, expression: str, cursor: str | None) -> Results:
    """The messages of `topic` that `expression` matches: one budgeted scan
    (storeadapter.engine.filters) from `cursor` (the start when None), by queue and
    offset; when it stops before the end, `continue_url` goes on from there."""
    result = filters.scan(store, topic, expression, cursor=cursor, max_matches=FILTER_PAGE)
    found = Results(MODE_FILTER, [row(m) for m in result.messages])
    found.summary = (
        f"{len(result.messages):,} matching of {result.scanned:,} records scanned"
        f"{' from ' + cursor if cursor else ''} in {result.seconds:.2f} s."
    )
    if result.errors:
        found.notes.append(
            f"The expression could not be evaluated on {result.errors:,} records (not "
            f"matched); the first: {result.first_error}"
        )
    if result.cursor is not None:
        found.notes.append(
            f"The scan stopped at queue {result.cursor.replace(':', ', offset ')} because "
            f"{_STOPPED.get(result.stopped, result.stopped)}."
        )
        query = {"mode": MODE_FILTER, "topic": topic, "expression": expression}
        found.continue_url = "?" + urlencode({**query, "cursor": result.cursor})
    return found
