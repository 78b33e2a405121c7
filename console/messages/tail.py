"""Live tail of a topic (issue 34, item 2): the messages appended to its queues (all, or
those chosen) from now on, answered to long polls. One logic for the console's tail page
(static/js/tail.js) and the API's ``/api/v1/topics/<topic>/tail/``.

1. A **cursor** says where a tail stands: the next queue offset of each queue it follows,
   and the state of its rate cap. It starts at the queues' ends (``start``); each answer
   carries the next one. Any cursor that matches ``CURSOR_PATTERN`` is taken: a queue it
   does not name starts at that queue's end, one it names that is not followed is left
   out, an offset past a queue's end is that end.
2. A **poll** (``poll``) answers at once when messages arrived past the cursor; else it
   waits for some through the store's own long-polling ``pull`` (one queue: a pull that
   waits the whole time; several: pulls of ``WAIT_SLICE_S`` each, in turn, the other
   queues looked at between them), never longer than ``wait_s``. Tailing only reads:
   ``pull`` is given offsets, so no group's committed offset is read or moved.
3. The **rate cap** is a token bucket of ``rate`` messages a second, holding one second's
   worth: an answer holds at most the tokens in the bucket. When more messages arrived
   than it may hold, the tail keeps up with the queues: it answers the newest, moves past
   the others and says how many it ``dropped``. A poll that finds an empty bucket waits
   for a token (at most 1 / ``rate`` s).

The store comes from ``get_store``: on a read by a user who reads the topic masked it
masks each message, as on the messages pages.

4. A **filter** (an expression of item 1, ``storeadapter.engine.filters``) selects what
   the tail shows: the new records of each queue are scanned natively (the newest
   ``FILTER_SCAN`` of each queue at most, per poll), and only the matches reach the rate
   cap. ``dropped`` then counts the matches the cap left out and the records too many to
   be scanned; records that do not match are not dropped, they are not wanted.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from storeadapter.engine import StoredMessage, filters
from storeadapter.engine import clock as engine_clock

#: The most messages a second a tail shows, and how many when not asked.
MAX_RATE = 1000
DEFAULT_RATE = 100
#: The longest one poll waits, in seconds (the API's pulls wait as long at most).
MAX_WAIT_S = 30.0
#: While several queues are followed, how long each of the waiting pulls lasts.
WAIT_SLICE_S = 0.01
#: With a filter, the most new records of one queue a poll scans (the newest).
FILTER_SCAN = 100_000
#: The rate cap's bucket holds this much time's worth of tokens.
BUCKET_MS = 1000
#: "queue:offset" pairs, comma-separated (none: every queue from its end), "@", and the
#: time (ms since the epoch) at which the rate cap's bucket was empty.
CURSOR_PATTERN = r"^(?:[0-9]{1,6}:[0-9]{1,19}(?:,[0-9]{1,6}:[0-9]{1,19})*)?@[0-9]{1,19}$"
CURSOR_MAX_LENGTH = 65536
#: Chosen queues: queue ids, comma-separated.
QUEUES_PATTERN = r"^[0-9]{1,6}(?:,[0-9]{1,6})*$"
QUEUES_MAX_LENGTH = 8192

_CURSOR = re.compile(CURSOR_PATTERN)
_QUEUES = re.compile(QUEUES_PATTERN)


class TailError(ValueError):
    """A cursor or a queue list that is not one (the sentence says what is expected)."""


@dataclass(frozen=True)
class Cursor:
    """Where a tail stands: the next offset per queue, and when its bucket was empty."""

    offsets: dict[int, int]
    empty_at_ms: int

    def __str__(self) -> str:
        pairs = ",".join(f"{queue}:{offset}" for queue, offset in sorted(self.offsets.items()))
        return f"{pairs}@{self.empty_at_ms}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        if not isinstance(text, str) or len(text) > CURSOR_MAX_LENGTH or not _CURSOR.match(text):
            raise TailError(
                "A tail cursor is the 'cursor' of the tail's last answer, such as "
                "0:15,1:20@1732846200000."
            )
        pairs, _, empty_at = text.partition("@")
        offsets: dict[int, int] = {}
        for pair in filter(None, pairs.split(",")):
            queue, _, offset = pair.partition(":")
            offsets[int(queue)] = int(offset)
        return cls(offsets, int(empty_at))


def parse_queues(text: str | None) -> list[int] | None:
    """The queue ids of ``"0,2,3"`` in order, each once; None for every queue."""
    if text is None or text == "":
        return None
    if len(text) > QUEUES_MAX_LENGTH or not _QUEUES.match(text):
        raise TailError("Queues are queue ids separated by commas, such as 0,2,3.")
    return sorted({int(queue) for queue in text.split(",")})


@dataclass(frozen=True)
class TailAnswer:
    """One poll's answer: the messages (in append order), the cursor to poll with next,
    and how many messages the rate cap left out of this answer."""

    messages: list[StoredMessage]
    cursor: Cursor
    dropped: int
    queues: list[int]


def followed_queues(store: Any, topic: str, queues: list[int] | None) -> list[int]:
    """The queue ids the tail follows: ``queues`` (each checked to exist: the store's
    QueueNotFoundError otherwise), or every queue of ``topic``."""
    if queues is None:
        return list(range(store.topic(topic).queues))
    for queue in queues:
        store.queue_range(topic, queue)
    return list(queues)


def start(store: Any, topic: str, queues: list[int] | None) -> Cursor:
    """A cursor at the end of each followed queue now, its bucket full."""
    followed = followed_queues(store, topic, queues)
    offsets = {queue: high for queue, (_, high) in queue_spans(store, topic, followed).items()}
    return Cursor(offsets, engine_clock.now_ms() - BUCKET_MS)


def queue_spans(store: Any, topic: str, followed: list[int]) -> dict[int, tuple[int, int]]:
    """(min offset, max offset) of each followed queue (sorted ids), in one call for the
    span of ids they cover (a big topic's other queues are not read)."""
    if not followed:
        return {}
    first = followed[0]
    spanned = store.queue_ranges(topic, first, followed[-1] - first + 1)
    return {queue: spanned[queue - first] for queue in followed}


def _tokens(empty_at_ms: int, now_ms: int, rate: int) -> float:
    """Tokens in the bucket at ``now_ms`` (a time to come counts as now: no tokens)."""
    elapsed = min(max(0, now_ms - empty_at_ms), BUCKET_MS)
    return elapsed * rate / 1000


def _newest(
    store: Any, topic: str, spans: dict[int, tuple[int, int]], room: int
) -> list[StoredMessage]:
    """The newest ``room`` messages (by commit-log offset: append order) of the queue
    spans ``{queue: (first, end)}``: each queue's last ``room`` at most are read."""
    found: list[StoredMessage] = []
    for queue, (first, end) in spans.items():
        begin = max(first, end - room)
        while begin < end:
            batch = store.read(topic, queue, begin, min(end - begin, room))
            if not batch:
                break
            found.extend(m for m in batch if m.queue_offset < end)
            begin = batch[-1].queue_offset + 1
    found.sort(key=lambda message: message.commit_offset)
    return found[-room:] if room else []


def _newest_matching(
    store: Any, topic: str, spans: dict[int, tuple[int, int]], room: int, compiled: Any
) -> tuple[list[StoredMessage], int]:
    """The newest ``room`` messages of ``spans`` that ``compiled`` matches, and how many
    others are left out (matches past ``room``, and records past ``FILTER_SCAN`` a
    queue, not scanned)."""
    found: list[StoredMessage] = []
    unscanned = 0
    for queue, (first, end) in spans.items():
        begin = max(first, end - FILTER_SCAN)
        unscanned += begin - first
        while begin < end:
            matched, begin_next, _, _, _ = filters.scan_queue(
                store, compiled, topic, queue, begin, end, end - begin, filters.MAX_MATCHES, 5.0
            )
            found.extend(matched)
            if begin_next <= begin:
                break
            begin = begin_next
    found.sort(key=lambda message: message.commit_offset)
    shown = found[-room:] if room else []
    return shown, unscanned + len(found) - len(shown)


def poll(
    store: Any,
    topic: str,
    queues: list[int] | None,
    cursor: Cursor | None,
    rate: int = DEFAULT_RATE,
    wait_s: float = 0.0,
    expression: str | None = None,
) -> TailAnswer:
    """The messages appended past ``cursor`` (None: from now on) to the followed queues
    that ``expression`` matches (all when None), waiting up to ``wait_s`` for some; at
    most what the rate cap allows (see the module's docstring). Raises the store's
    TopicNotFoundError or QueueNotFoundError, and FilterSyntaxError."""
    compiled = filters.compile_filter(expression) if expression else None
    followed = followed_queues(store, topic, queues)
    if cursor is None:
        cursor = start(store, topic, followed)
    deadline = time.monotonic() + max(0.0, min(wait_s, MAX_WAIT_S))
    positions: dict[int, int] = {}
    for queue, (low, high) in queue_spans(store, topic, followed).items():
        positions[queue] = max(low, min(cursor.offsets.get(queue, high), high))
    empty_at = min(cursor.empty_at_ms, engine_clock.now_ms())
    turn = 0
    while True:
        spans = {}
        for queue, (low, high) in queue_spans(store, topic, followed).items():
            first = max(low, positions[queue])
            if first < high:
                spans[queue] = (first, high)
        now = engine_clock.now_ms()
        tokens = _tokens(empty_at, now, rate)
        remaining = deadline - time.monotonic()
        if spans and tokens >= 1:
            room = int(tokens)
            if compiled is None:
                shown = _newest(store, topic, spans, room)
                dropped = sum(end - first for first, end in spans.values()) - len(shown)
            else:
                shown, dropped = _newest_matching(store, topic, spans, room, compiled)
            for queue, (_, end) in spans.items():
                positions[queue] = end
            if compiled is not None and not shown and not dropped:
                continue  # nothing new matched: wait on (the bucket is untouched)
            # Tokens not spent stay in the bucket: it was empty that much later.
            empty_at = now - math.floor((tokens - len(shown)) * 1000 / rate)
            return TailAnswer(shown, Cursor(positions, empty_at), dropped, followed)
        if remaining <= 0:
            return TailAnswer([], Cursor(positions, empty_at), 0, followed)
        if spans:
            # Messages wait and the bucket is empty: sleep until it holds one token.
            until_token_s = (1 - tokens) / rate
            time.sleep(min(remaining, max(until_token_s, 0.001)))
            continue
        # Nothing yet: wait in the store's pull for an append to one of the queues.
        queue = followed[turn % len(followed)] if followed else None
        turn += 1
        if queue is None:
            time.sleep(min(remaining, WAIT_SLICE_S))
            continue
        slice_s = remaining if len(followed) == 1 else min(remaining, WAIT_SLICE_S)
        store.pull("", topic, queue, 1, timeout_s=slice_s, offset=positions[queue])
