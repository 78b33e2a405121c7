"""Filter expressions over a topic's messages (issue 34, item 1): the one door the
console, the API, the CLI, the tail and the Spark source go through.

An expression is CEL (the Common Expression Language) over a message's fields, compiled
once by the native crate (``native/src/filter.rs`` lists the variables: ``topic``,
``queue``, ``offset``, ``commit_offset``, ``born_ms``, ``stored_ms``, ``tag``, ``key``,
``keys``, ``properties``, ``text``, ``body`` (parsed JSON) and ``body_size``), e.g.
``body.order.total > 100 && tag == "paid"``.

``scan`` is bounded: it looks at most at ``max_records`` records, for about
``max_seconds``, and keeps at most ``max_matches``; its answer says where it stopped
(``cursor``), and a scan given that cursor goes on from there. On a store opened here
(``MessageStore``) each queue range is one native call that evaluates the expression per
record, with no Python per record; any other store (a masking view) is read through its
``read`` and each message it gives is evaluated natively one by one, so a filter sees
what the reader sees.

A record whose evaluation fails (a field it lacks, types that do not compare) does not
match; the answer counts them and keeps the first sentence.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field
from typing import Any

from . import dataplane
from .errors import StoreError

#: The longest expression accepted, in bytes (the crate's bound).
MAX_EXPRESSION = 4096
#: Defaults and ceilings of a scan's budget.
DEFAULT_MAX_RECORDS = 1_000_000
MAX_RECORDS = 100_000_000
DEFAULT_MAX_SECONDS = 5.0
MAX_SECONDS = 60.0
DEFAULT_MAX_MATCHES = 100
MAX_MATCHES = 10_000
#: The longest one native call scans (it holds the GIL): the scan hands back between
#: slices, so the console's other threads are not kept waiting for a whole budget.
SLICE_S = 0.05
#: Messages read at a time from a store that is not scanned natively.
_READ_CHUNK = 500
#: A cursor: the queue and the queue offset a scan goes on from.
CURSOR_PATTERN = r"^[0-9]{1,6}:[0-9]{1,19}$"
_CURSOR = re.compile(CURSOR_PATTERN)

Filter = dataplane.Filter


class FilterSyntaxError(StoreError, ValueError):
    """An expression that does not compile: ``message`` says why, ``position`` (0-based
    character index), ``line`` and ``column`` (1-based) say where."""

    def __init__(self, message: str, position: int, line: int, column: int) -> None:
        super().__init__(f"{message} (at line {line}, column {column})")
        self.message = message
        self.position = position
        self.line = line
        self.column = column


class FilterCursorError(StoreError, ValueError):
    """A cursor that is not "queue:offset"."""


@functools.lru_cache(maxsize=256)
def compile_filter(expression: str) -> Any:
    """The compiled ``expression`` (a ``_native.Filter``, kept for the next asker).
    Raises FilterSyntaxError with the position of what is wrong."""
    if not isinstance(expression, str):
        raise FilterSyntaxError("the expression must be text", 0, 1, 1)
    try:
        return dataplane.Filter(expression)
    except ValueError as error:
        message, position, line, column = error.args
        raise FilterSyntaxError(message, position, line, column) from None


def parse_cursor(text: str) -> tuple[int, int]:
    """(queue, offset) of a cursor "queue:offset"."""
    if not _CURSOR.match(text or ""):
        raise FilterCursorError(f"{text!r} is not a cursor: expected queue:offset, e.g. 0:1500")
    queue, offset = text.split(":")
    return int(queue), int(offset)


@dataclass
class FilterResult:
    """What a scan found and how far it got.

    ``cursor`` is where to go on from ("queue:offset"), None when every queue asked for
    was scanned to its end; ``stopped`` says why it stopped: "end", "matches" (it holds
    ``max_matches``), "records" or "seconds" (the budget)."""

    messages: list = field(default_factory=list)
    cursor: str | None = None
    scanned: int = 0
    errors: int = 0
    first_error: str | None = None
    stopped: str = "end"
    seconds: float = 0.0


def matches(compiled: Any, message: Any) -> tuple[bool, str | None]:
    """(whether ``message`` (a StoredMessage) matches, the evaluation's error or None)."""
    return compiled.matches(
        message.topic,
        message.queue,
        message.queue_offset,
        message.commit_offset,
        message.born_time_ms,
        message.store_time_ms,
        message.tag,
        list(message.keys),
        dict(message.properties),
        bytes(message.body),
    )


def _native_scan(store: Any) -> Any:
    """The store's native core when the scan may use it: a MessageStore opened here,
    not a view (which may mask what it reads)."""
    from .store import MessageStore

    if type(store) is MessageStore:
        return getattr(store, "_core", None)
    return None


def scan(
    store: Any,
    topic: str,
    expression: str | Any,
    *,
    queues: list[int] | None = None,
    cursor: str | None = None,
    max_records: int = DEFAULT_MAX_RECORDS,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_matches: int = DEFAULT_MAX_MATCHES,
) -> FilterResult:
    """The messages of ``topic`` (its ``queues``, all when None, in queue order, each
    from its first offset or from ``cursor``) that ``expression`` matches, within the
    budget (see the module's docstring). Raises FilterSyntaxError, FilterCursorError, the
    store's TopicNotFoundError and QueueNotFoundError."""
    compiled = compile_filter(expression) if isinstance(expression, str) else expression
    max_records = max(1, min(int(max_records), MAX_RECORDS))
    max_seconds = max(0.001, min(float(max_seconds), MAX_SECONDS))
    max_matches = max(1, min(int(max_matches), MAX_MATCHES))
    chosen = sorted(set(queues)) if queues is not None else list(range(store.topic(topic).queues))
    for queue in chosen if queues is not None else ():
        store.queue_range(topic, queue)
    start_queue, start_offset = parse_cursor(cursor) if cursor else (None, 0)
    if start_queue is not None:
        chosen = [q for q in chosen if q >= start_queue]
    result = FilterResult()
    started = time.monotonic()
    for queue in chosen:
        low, high = store.queue_range(topic, queue)
        position = max(low, start_offset if queue == start_queue else low)
        while position < high:
            left_s = max_seconds - (time.monotonic() - started)
            left_records = max_records - result.scanned
            left_matches = max_matches - len(result.messages)
            if left_s <= 0 or left_records <= 0 or left_matches <= 0:
                result.cursor = f"{queue}:{position}"
                result.stopped = (
                    "matches"
                    if left_matches <= 0
                    else "records"
                    if left_records <= 0
                    else "seconds"
                )
                result.seconds = time.monotonic() - started
                return result
            answer = scan_queue(
                store,
                compiled,
                topic,
                queue,
                position,
                high,
                left_records,
                left_matches,
                min(left_s, SLICE_S),
            )
            found, next_position, scanned, errors, first_error = answer
            result.messages.extend(found)
            result.scanned += scanned
            result.errors += errors
            if result.first_error is None:
                result.first_error = first_error
            if next_position <= position:
                break  # nothing more can be read from this queue now
            position = next_position
    result.seconds = time.monotonic() - started
    return result


def scan_queue(
    store: Any,
    compiled: Any,
    topic: str,
    queue: int,
    start: int,
    end: int,
    max_records: int,
    max_matches: int,
    max_seconds: float,
) -> tuple[list, int, int, int, str | None]:
    """One step of a scan of queue ``queue`` from offset ``start`` up to ``end``: (the
    matches, the offset to go on from, records looked at, evaluation errors, the first
    error). Natively on a MessageStore's queue the core reads; else through
    ``store.read``, one chunk."""
    core = _native_scan(store)
    if core is not None:
        answer = core.scan_filtered(
            compiled, topic, queue, start, end, max_records, max_matches, max_seconds
        )
        if answer is not None:
            return answer
    return _scan_read(store, compiled, topic, queue, start, end, max_records, max_matches)


def _scan_read(
    store: Any,
    compiled: Any,
    topic: str,
    queue: int,
    position: int,
    end: int,
    max_records: int,
    max_matches: int,
) -> tuple[list, int, int, int, str | None]:
    """``scan_filtered``'s answer for one chunk read through ``store.read``."""
    batch = store.read(topic, queue, position, min(_READ_CHUNK, end - position, max_records))
    found: list = []
    errors = 0
    first_error = None
    scanned = 0
    next_position = position
    for message in batch:
        if message.queue_offset >= end:
            break
        scanned += 1
        next_position = message.queue_offset + 1
        hit, error = matches(compiled, message)
        if error is not None:
            errors += 1
            first_error = first_error or error
        if hit:
            found.append(message)
            if len(found) >= max_matches:
                break
    return found, next_position, scanned, errors, first_error
