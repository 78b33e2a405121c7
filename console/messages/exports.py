"""Exports of any search's result set (by key, by time, a queue range, a filter
expression) as JSON Lines, for the messages page and the API alike.

An export streams: it reads a chunk of messages at a time (EXPORT_CHUNK), writes each as
a line (``console.messages.records.export_line``) and keeps nothing else, so its memory
does not grow with what it exports. It is bounded by a ``Budget``: at most ``records``
messages and ``seconds`` of reading. Its last line is always the trailer::

    {
        "export": {
            "complete": false,
            "messages": 10000,
            "stopped_by": "records",
            "next": {"until": 1714564800000, "skip": 3},
            "continue": "/api/v1/messages/export/?topic=orders&key=k&until=…&skip=3",
        }
    }

``complete`` says whether the result set was exported to its end; when it was not,
``next`` holds the parameters that continue it (the search's own, moved on) and
``continue`` the URL that asks for the rest. A line is a message when it has a
``message_id``; the trailer is the one line with ``export``.

Continuing: a search by key reads newest first, so the rest are the messages stored up to
``until`` (the last exported message's time) less the ``skip`` first of them, which were
exported already (messages stored in the same millisecond); a search by time reads oldest
first from ``since``, the same way; a queue range goes on from the next offset; a filter
export from its ``cursor`` ("queue:offset", the scan's own: just past the last record it
looked at); a tail export from its ``cursor`` (the live tail's, "queue:offset,…@ms": the
next offset of each queue it follows).
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django import forms

from console.messages import records, tail
from console.messages.search import EXPORT_CHUNK, EXPORT_MAX, _oldest_first, queue_since
from storeadapter.engine import MessageStore, StoredMessage, filters

#: The most messages one export holds, and the default.
MAX_RECORDS = 100_000
DEFAULT_RECORDS = EXPORT_MAX
#: The most seconds one export reads, and the default.
MAX_SECONDS = 300
DEFAULT_SECONDS = 30

#: The most messages a continued export skips (those of one millisecond exported before).
MAX_SKIP = 10**9
#: Times in milliseconds: to the end of the year 9999.
MAX_TIME_MS = 253_402_300_799_999
#: The most messages one read of the key index gives a key export.
KEY_CHUNK_MAX = 8 * EXPORT_CHUNK
#: The most messages a time export's queues hold read ahead, together.
MERGE_WINDOW = 2 * EXPORT_CHUNK

#: The most records one scan of a filter export looks at before the export writes what
#: it found and scans on (its seconds are the export's remaining ones).
FILTER_SCAN_RECORDS = 1_000_000

STOPPED_BY_RECORDS, STOPPED_BY_SECONDS = "records", "seconds"


@dataclass(frozen=True)
class Budget:
    """How much one export may read: messages, and seconds from its first read; and who
    is told how many messages it held, once sent (the audited read)."""

    records: int = DEFAULT_RECORDS
    seconds: float = DEFAULT_SECONDS
    sent: Callable[[int], None] | None = None


@dataclass(frozen=True)
class Continuation:
    """How the page or the API asks for the rest of an export: its path, the query it was
    asked with, and its names for where an export goes on (``since``, ``until``,
    ``from``, ``skip``: the trailer's ``next`` uses the asker's names)."""

    path: str
    query: dict[str, Any]
    names: dict[str, str] = field(default_factory=dict)

    def next(self, after: dict[str, Any]) -> dict[str, Any]:
        return {self.names.get(name, name): value for name, value in after.items()}

    def url(self, after: dict[str, Any]) -> str:
        moved = self.next(after)
        kept = {k: v for k, v in self.query.items() if k not in moved and k != "skip"}
        kept.update((k, v) for k, v in moved.items() if v is not None)
        return f"{self.path}?{urlencode(kept)}"


class _Cursor:
    """Where a stream of messages in one time order got to: the last message's store
    time, and how many messages stored in that millisecond were exported."""

    def __init__(self, start_ms: int | None, skipped: int) -> None:
        self.ms = start_ms
        self.same = skipped

    def passed(self, message: StoredMessage) -> None:
        if message.store_time_ms == self.ms:
            self.same += 1
        else:
            self.ms, self.same = message.store_time_ms, 1


def _trailer(
    complete: bool, count: int, stopped_by: str | None, after: dict | None, then: Continuation
) -> bytes:
    data = {
        "complete": complete,
        "messages": count,
        "stopped_by": stopped_by,
        "next": None if complete or after is None else then.next(after),
        "continue": None if complete or after is None else then.url(after),
    }
    return (json.dumps({"export": data}, ensure_ascii=False) + "\n").encode("utf-8")


def _bounded(
    messages: Iterator[StoredMessage],
    skip: int,
    budget: Budget,
    on_message: Callable[[StoredMessage], None],
    where: Callable[[], dict],
    then: Continuation,
) -> Iterator[bytes]:
    """The lines of ``messages`` but the ``skip`` first within ``budget``, then the
    trailer (``where()``: the parameters that continue after the last message given to
    ``on_message``). Skipping counts against the seconds too: a skip the seconds do not
    cover stops the export where it was asked to start."""
    deadline = time.monotonic() + budget.seconds
    count = 0
    stopped_by = None
    for message in messages:
        if skip:
            skip -= 1
            if time.monotonic() > deadline:
                stopped_by = STOPPED_BY_SECONDS
                break
            continue
        if count >= budget.records:
            stopped_by = STOPPED_BY_RECORDS
            break
        if time.monotonic() > deadline:
            stopped_by = STOPPED_BY_SECONDS
            break
        yield records.export_line(message)
        on_message(message)
        count += 1
    complete = stopped_by is None
    yield _trailer(complete, count, stopped_by, None if complete else where(), then)
    if budget.sent is not None:
        budget.sent(count)


def _key_messages(
    store: MessageStore,
    topic: str,
    key: str,
    begin_ms: int | None,
    end_ms: int | None,
) -> Iterator[StoredMessage]:
    """The messages of ``topic`` with ``key`` stored from ``begin_ms`` to ``end_ms``,
    newest first; read through the key index a chunk at a time, from EXPORT_CHUNK doubling
    up to KEY_CHUNK_MAX (each chunk ends where the last one did: up to its last message's
    millisecond, less those of it read). Each read walks the index from ``until`` back, so
    fewer, larger chunks cost less: 60,000 messages of one key took 6.8 s of CPU, against
    22.9 s in chunks of 500 (memory at most 13.5 MiB either way, 1 KiB bodies)."""
    until, same, chunk = end_ms, 0, EXPORT_CHUNK
    while True:
        found = store.query_by_key(topic, key, begin_ms, until, same + chunk)
        fresh = found[same:]
        yield from fresh
        if len(found) < same + chunk or not fresh:
            return
        last = fresh[-1].store_time_ms
        same = sum(1 for m in found if m.store_time_ms == last)
        until = last
        chunk = min(chunk * 2, KEY_CHUNK_MAX)


def key_export(
    store: MessageStore,
    topic: str,
    key: str,
    begin_ms: int | None,
    end_ms: int | None,
    skip: int,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    """JSON Lines of a search by key (newest first), then the trailer."""
    cursor = _Cursor(end_ms, skip)

    def where() -> dict:
        return {"until": cursor.ms, "skip": cursor.same}

    messages = _key_messages(store, topic, key, begin_ms, end_ms)
    return _bounded(messages, skip, budget, cursor.passed, where, then)


def time_export(
    store: MessageStore,
    topic: str,
    since_ms: int | None,
    until_ms: int | None,
    queues: range,
    skip: int,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    """JSON Lines of a search by time over ``queues`` (merged, oldest first), less its
    ``skip`` first messages, then the trailer."""
    cursor = _Cursor(since_ms, skip)

    def where() -> dict:
        return {"since": cursor.ms, "skip": cursor.same}

    # Each queue is read a fixed chunk at a time: all of them hold MERGE_WINDOW messages
    # at most (and one each), however many queues there are.
    chunk = max(1, MERGE_WINDOW // max(1, len(queues)))
    streams = [
        queue_since(store, topic, q, since_ms or 0, until_ms, chunk, most=chunk) for q in queues
    ]
    merged = heapq.merge(*streams, key=_oldest_first)
    return _bounded(merged, skip, budget, cursor.passed, where, then)


def range_export(
    store: MessageStore,
    topic: str,
    queue: int,
    first: int,
    last: int,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    """JSON Lines of one queue's offsets first ≤ o < last, then the trailer."""
    position = {"next": first}

    def passed(message: StoredMessage) -> None:
        position["next"] = message.queue_offset + 1

    def where() -> dict:
        return {"from": position["next"]}

    return _bounded(_queue_range(store, topic, queue, first, last), 0, budget, passed, where, then)


def _queue_range(
    store: MessageStore, topic: str, queue: int, first: int, last: int
) -> Iterator[StoredMessage]:
    position = first
    while position < last:
        read = store.read_result(topic, queue, position, min(EXPORT_CHUNK, last - position))
        for message in read.messages:
            if message.queue_offset >= last:
                return
            yield message
        if read.next_offset <= position:
            return
        position = read.next_offset


def filter_export(
    store: MessageStore,
    topic: str,
    expression: str,
    queues: list[int] | None,
    cursor: str | None,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    """JSON Lines of the messages of ``topic`` (its ``queues``, every one when None) that
    ``expression`` matches, by queue and offset from ``cursor`` (the start when None),
    then the trailer (``next``: ``{"cursor": …}``).

    Scans a chunk of matches at a time (at most EXPORT_CHUNK, FILTER_SCAN_RECORDS records
    looked at, the budget's remaining seconds), writes them and scans on from the scan's
    cursor, so memory holds one chunk however many match and a rare match stops at the
    seconds budget. The budget's records are the messages exported. When they run out
    exactly where a scan stopped short of the end, the export says ``records`` without
    knowing whether more match: continuing it may give none (and then says complete).

    The expression, the cursor, the topic and the queues are checked here, before the
    first line (FilterSyntaxError, FilterCursorError, TopicNotFoundError,
    QueueNotFoundError), so a caller can refuse them rather than break off a stream."""
    compiled = filters.compile_filter(expression)
    if cursor:
        filters.parse_cursor(cursor)
    store.topic(topic)
    for queue in queues or ():
        store.queue_range(topic, queue)
    return _filter_lines(store, topic, compiled, queues, cursor, budget, then)


def _filter_lines(
    store: MessageStore,
    topic: str,
    compiled: Any,
    queues: list[int] | None,
    cursor: str | None,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    deadline = time.monotonic() + budget.seconds
    count = 0
    stopped_by = None
    while True:
        left_records = budget.records - count
        left_s = deadline - time.monotonic()
        if left_records <= 0:
            stopped_by = STOPPED_BY_RECORDS
            break
        if left_s <= 0:
            stopped_by = STOPPED_BY_SECONDS
            break
        result = filters.scan(
            store,
            topic,
            compiled,
            queues=queues,
            cursor=cursor,
            max_records=FILTER_SCAN_RECORDS,
            max_seconds=min(left_s, filters.MAX_SECONDS),
            max_matches=min(EXPORT_CHUNK, left_records),
        )
        for message in result.messages:
            yield records.export_line(message)
        count += len(result.messages)
        if result.cursor is None:
            break
        cursor = result.cursor
    complete = stopped_by is None
    yield _trailer(complete, count, stopped_by, None if complete else {"cursor": cursor}, then)
    if budget.sent is not None:
        budget.sent(count)


class _OutOfTime(Exception):
    """A tail export's scan of one queue ran out of the export's seconds."""


def tail_export(
    store: MessageStore,
    topic: str,
    queues: list[int] | None,
    cursor: tail.Cursor,
    expression: str | None,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    """JSON Lines of the live tail's results: the messages appended to ``topic``'s queues
    (``queues``, every one when None) past ``cursor``'s offsets, up to the queues' ends
    when the export starts, that ``expression`` matches (all when None), in append order
    (by commit-log offset, queues merged); then the trailer (``next``: ``{"cursor": …}``,
    a tail cursor, which the tail itself takes too). The cursor is read as the tail reads
    it: a queue it does not name starts at that queue's end, an offset outside a queue's
    offsets is the nearest of them. No rate cap: the budget bounds the export. Reads
    offsets only, as the tail does: no group's committed offset is read or moved.

    The expression, the topic and the queues are checked here, before the first line
    (FilterSyntaxError, TopicNotFoundError, QueueNotFoundError)."""
    compiled = filters.compile_filter(expression) if expression else None
    followed = tail.followed_queues(store, topic, queues)
    return _tail_lines(store, topic, followed, cursor, compiled, budget, then)


def _tail_queue(
    store: MessageStore,
    topic: str,
    queue: int,
    first: int,
    end: int,
    compiled: Any,
    chunk: int,
    deadline: float,
) -> Iterator[StoredMessage]:
    """Queue ``queue``'s messages first ≤ offset < end (those ``compiled`` matches), a
    chunk at a time; _OutOfTime when a filter's scan passes ``deadline`` short of ``end``."""
    if compiled is None:
        yield from _queue_range(store, topic, queue, first, end)
        return
    position = first
    while position < end:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise _OutOfTime
        matched, position_next, _, _, _ = filters.scan_queue(
            store,
            compiled,
            topic,
            queue,
            position,
            end,
            FILTER_SCAN_RECORDS,
            chunk,
            min(left_s, filters.MAX_SECONDS),
        )
        yield from matched
        if position_next <= position:
            return
        position = position_next


def _tail_lines(
    store: MessageStore,
    topic: str,
    followed: list[int],
    cursor: tail.Cursor,
    compiled: Any,
    budget: Budget,
    then: Continuation,
) -> Iterator[bytes]:
    deadline = time.monotonic() + budget.seconds
    positions: dict[int, int] = {}
    ends: dict[int, int] = {}
    for queue, (low, high) in tail.queue_spans(store, topic, followed).items():
        positions[queue] = max(low, min(cursor.offsets.get(queue, high), high))
        ends[queue] = high
    # Each queue is read a fixed chunk at a time, as a time export's are.
    chunk = max(1, MERGE_WINDOW // max(1, len(followed)))
    streams = [
        _tail_queue(store, topic, q, positions[q], ends[q], compiled, chunk, deadline)
        for q in followed
    ]
    merged = heapq.merge(*streams, key=lambda message: message.commit_offset)
    count = 0
    stopped_by = None
    try:
        for message in merged:
            if count >= budget.records:
                stopped_by = STOPPED_BY_RECORDS
                break
            if time.monotonic() > deadline:
                stopped_by = STOPPED_BY_SECONDS
                break
            yield records.export_line(message)
            positions[message.queue] = message.queue_offset + 1
            count += 1
    except _OutOfTime:
        stopped_by = STOPPED_BY_SECONDS
    complete = stopped_by is None
    after = None if complete else {"cursor": str(tail.Cursor(positions, cursor.empty_at_ms))}
    yield _trailer(complete, count, stopped_by, after, then)
    if budget.sent is not None:
        budget.sent(count)


class ExportOptionsForm(forms.Form):
    """What the page's export takes besides the search: its budget, and where a continued
    export starts (the parameters an export's last line gives)."""

    max_records = forms.IntegerField(required=False, min_value=1, max_value=MAX_RECORDS)
    max_seconds = forms.IntegerField(required=False, min_value=1, max_value=MAX_SECONDS)
    skip = forms.IntegerField(required=False, min_value=0, max_value=MAX_SKIP)
    since_ms = forms.IntegerField(required=False, min_value=0, max_value=MAX_TIME_MS)
    until_ms = forms.IntegerField(required=False, min_value=0, max_value=MAX_TIME_MS)

    def budget(self, sent: Callable[[int], None] | None = None) -> Budget:
        data = self.cleaned_data
        return Budget(
            data.get("max_records") or DEFAULT_RECORDS,
            data.get("max_seconds") or DEFAULT_SECONDS,
            sent,
        )


def filename(topic: str, what: str) -> str:
    """The file name an export is downloaded as: safe characters only."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{topic}-{what}.jsonl")
