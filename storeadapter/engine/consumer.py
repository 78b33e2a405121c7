"""The consumer client: group membership, rebalancing, a sliding commit window, retries.

    def handle(message):  # a StoredMessage; raise to have it retried later
        print(message.body)


    with Consumer("var/store", "billing", ["orders"], handle, threads=4):
        time.sleep(60)

A consumer joins its group through heartbeat files (``membership``); every heartbeat it
lists the live members and divides each topic's queues over the members subscribed to
it (RocketMQ's AllocateMessageQueueAveragely). For every queue it holds it reads from
its own position, hands the messages to ``handler`` (one at a time, or on a thread
pool), and commits the lowest offset not yet finished (a sliding window): delivery is
at-least-once; after a crash or a rebalance a message may be handled again.

Commits are conditional (``expected=`` the offset this consumer last committed or
read): when an operator resets a group's offset while it runs, the commit fails with
OffsetConflictError and the consumer drops what it had in flight on that queue and
goes on from the operator's offset, instead of committing over it. Idle queues notice
a reset at the next heartbeat.

A handler that raises sends the message to the group's retry topic ``%RETRY%<group>``
(one queue, consumed by the group like its other topics) with the properties in
``RETRY_PROPERTIES``; it is handed to the handler again once ``RETRY_AT_MS`` has
passed, with its original topic, queue, queue offset and message id restored. After
``max_retries`` retries have failed too, it goes to ``%DLQ%<group>`` instead, from
where ``deadletters.redrive_dlq`` sends it back to its topic.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import clock, membership
from .config import StoreConfig
from .deadletters import (
    LAST_ERROR,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    RETRY_AT_MS,
    RETRY_COUNT,
)
from .errors import (
    OffsetConflictError,
    QueueNotFoundError,
    StoreClosedError,
    StoreError,
    TopicExistsError,
    TopicNotFoundError,
)
from .names import DEDUP_PROPERTY, check_name, dlq_topic, retry_topic
from .offsets import group_position
from .results import StoredMessage
from .store import MessageStore

log = logging.getLogger(__name__)

# RocketMQ's delay levels from 1 s on: the n-th retry waits retry_delays_s[n - 1] (the
# last value for retries beyond the tuple).
DEFAULT_RETRY_DELAYS_S = (
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
)  # fmt: skip

_MIN_IDLE_S = 0.002
_MAX_IDLE_S = 0.05
_FORWARD_BACKOFF_S = (0.05, 0.2, 1.0)
_MAX_ERROR_CHARS = 500


class _QueueState:
    """What a consumer holds of one queue: its read position and its unfinished window."""

    def __init__(self, topic: str, queue: int, position: int, committed: int | None) -> None:
        self.topic = topic
        self.queue = queue
        self.position = position  # the next offset to read
        self.committed = committed  # what this consumer last committed or read as committed
        self.window: OrderedDict[int, bool] = OrderedDict()  # offset -> finished, in order
        self.delayed: list[tuple[int, StoredMessage]] = []  # retry messages not yet due
        self.epoch = 0  # bumped when the window is dropped: late finishes are ignored

    def lowest_unfinished(self) -> int:
        window = self.window
        while window:
            offset, finished = next(iter(window.items()))
            if not finished:
                return offset
            window.popitem(last=False)
        return self.position

    def restart_at(self, position: int, committed: int | None) -> None:
        self.position = position
        self.committed = committed
        self.window.clear()
        self.delayed.clear()
        self.epoch += 1


class Consumer:
    """A member of consumer group ``group`` handling messages of ``topics``.

    ``start()`` runs it on a background thread (``stop()`` ends it: running handlers
    finish, what finished is committed, the member leaves the group); ``run_forever()``
    runs it on the calling thread until ``stop()``. It is also a context manager that
    starts and stops it.

    ``handler(message)`` gets a StoredMessage; returning counts as handled, raising
    sends the message to the retry topic. With ``threads`` > 1 handlers run
    concurrently (order within a queue is then not kept). ``max_retries`` is how many
    times a failed message is tried again before it goes to the dead-letter topic;
    ``retry_delays_s[n - 1]`` is the wait before the n-th retry. A queue's read position
    runs at most ``max_window`` offsets ahead of its lowest unfinished offset (RocketMQ's
    consumeConcurrentlyMaxSpan): a handler stuck on one message stops the reading of
    its queue there. Offsets are committed every ``commit_interval_s`` (default: every
    heartbeat), whether or not they moved (as Kafka clients commit on an interval: a
    consumer stuck on a message keeps committing the same offset, which monitors read as
    stalled, not stopped), when a queue is given up, and on stop.

    Idle queues are polled, reading at most ``pull_batch`` messages per queue a round:
    at once while messages come, backing off to a look every ``pull_timeout_s`` (at
    most 50 ms) while none do.
    """

    def __init__(
        self,
        store_path: str | os.PathLike,
        group: str,
        topics: str | Iterable[str],
        handler: Callable[[StoredMessage], object],
        consumer_id: str | None = None,
        *,
        config: StoreConfig | None = None,
        threads: int = 1,
        max_retries: int = 16,
        retry_delays_s: Sequence[float] = DEFAULT_RETRY_DELAYS_S,
        member_timeout_s: float = 10.0,
        heartbeat_interval_s: float = 1.0,
        pull_batch: int = 32,
        pull_timeout_s: float = 0.5,
        max_window: int = 2000,
        commit_interval_s: float | None = None,
    ) -> None:
        self.store_path = Path(store_path)
        self.group = check_name(group, "group")
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("a consumer needs at least one topic")
        self.topics = sorted({check_name(t, "topic") for t in names})
        if not callable(handler):
            raise TypeError("handler must be callable")
        self.handler = handler
        self.consumer_id = membership.check_consumer_id(
            consumer_id if consumer_id is not None else membership.default_consumer_id()
        )
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer ≥ 1, not {threads!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer ≥ 0, not {max_retries!r}")
        self.retry_delays_s = tuple(float(d) for d in retry_delays_s)
        if not self.retry_delays_s or any(d < 0 for d in self.retry_delays_s):
            raise ValueError("retry_delays_s must be a non-empty sequence of delays ≥ 0")
        if not 0 < heartbeat_interval_s < member_timeout_s:
            raise ValueError(
                "heartbeat_interval_s must be positive and shorter than member_timeout_s "
                f"(got {heartbeat_interval_s} and {member_timeout_s})"
            )
        if not isinstance(pull_batch, int) or pull_batch < 1:
            raise ValueError(f"pull_batch must be an integer ≥ 1, not {pull_batch!r}")
        if not isinstance(max_window, int) or max_window < 1:
            raise ValueError(f"max_window must be an integer ≥ 1, not {max_window!r}")
        self.config = config
        self.threads = threads
        self.max_retries = max_retries
        self.member_timeout_s = float(member_timeout_s)
        self.heartbeat_interval_s = float(heartbeat_interval_s)
        self.pull_batch = pull_batch
        self.pull_timeout_s = max(0.0, float(pull_timeout_s))
        self.max_window = max_window
        self.commit_interval_s = (
            self.heartbeat_interval_s if commit_interval_s is None else float(commit_interval_s)
        )
        self.retry_topic = retry_topic(self.group)
        self.dlq_topic = dlq_topic(self.group)
        self._subscribed = sorted({*self.topics, self.retry_topic})

        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._owned: dict[tuple[str, int], _QueueState] = {}
        self._store: MessageStore | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._started_ms = 0
        self._reported: list[tuple[str, int]] = []
        self._local = threading.local()
        self.handled = 0  # handler calls that returned
        self.failed = 0  # handler calls that raised

    # ------------------------------------------------------------- lifecycle

    def start(self) -> Consumer:
        """Open the store, join the group and consume on a background thread."""
        self._prepare()
        self._thread = threading.Thread(
            target=self._loop, name=f"consumer-{self.consumer_id}", daemon=True
        )
        self._thread.start()
        return self

    def run_forever(self) -> None:
        """Consume on the calling thread until ``stop()`` is called (from elsewhere)."""
        self._prepare()
        self._loop()

    def stop(self) -> None:
        """Stop consuming: wait for running handlers, commit what finished, leave the group.

        Messages read but not handled yet are left for whoever holds their queue next.
        Called from a handler, it only asks the consumer to stop and returns at once.
        """
        self._stopping.set()
        self._wake.set()
        if getattr(self._local, "in_handler", False):
            return
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._stopped.wait()
        self._thread = None

    def __enter__(self) -> Consumer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return not self._stopped.is_set()

    def assigned_queues(self) -> list[tuple[str, int]]:
        """The queues this consumer holds now, sorted."""
        with self._lock:
            return sorted(self._owned)

    def _prepare(self) -> None:
        if not self._stopped.is_set():
            raise RuntimeError(f"consumer {self.consumer_id} is already running")
        self._stopping.clear()
        self._wake.clear()
        store = MessageStore.open(self.store_path, self.config)
        try:
            for topic in self.topics:
                store.topic(topic)  # TopicNotFoundError now rather than silence later
            self._ensure_topic(store, self.retry_topic)
        except BaseException:
            store.close()
            raise
        self._store = store
        self._executor = ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix=f"handler-{self.consumer_id}"
        )
        self._owned = {}
        self._reported = []
        self._started_ms = clock.now_ms()
        self._stopped.clear()

    @staticmethod
    def _ensure_topic(store: MessageStore, name: str) -> None:
        try:
            store.topic(name)
        except TopicNotFoundError:
            with contextlib.suppress(TopicExistsError):
                store.create_topic(name, queues=1)

    # ------------------------------------------------------------------ loop

    def _loop(self) -> None:
        try:
            next_tick = 0.0
            idle = _MIN_IDLE_S
            while not self._stopping.is_set():
                try:
                    if time.monotonic() >= next_tick:
                        self._tick()
                        next_tick = time.monotonic() + min(
                            self.heartbeat_interval_s, self.commit_interval_s
                        )
                    busy = self._fetch()
                except StoreClosedError:
                    raise
                except Exception:
                    log.exception("consumer %s: loop step failed; going on", self.consumer_id)
                    busy = False
                    self._stopping.wait(0.1)
                if busy:
                    idle = _MIN_IDLE_S
                    continue
                wait = min(idle, max(0.0, next_tick - time.monotonic()), self._until_due())
                if self._wake.wait(wait):
                    self._wake.clear()
                    idle = _MIN_IDLE_S
                else:
                    idle = min(idle * 2, max(_MIN_IDLE_S, min(self.pull_timeout_s, _MAX_IDLE_S)))
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        store = self._store
        try:
            if store is not None:
                with self._lock:
                    owned = list(self._owned.values())
                    self._owned = {}
                for state in owned:
                    self._commit(state, releasing=True)
        finally:
            try:
                membership.leave(self.store_path, self.group, self.consumer_id)
            finally:
                self._store = None
                if store is not None:
                    store.close()
                self._stopped.set()

    def _tick(self) -> None:
        """Heartbeat, rebalance, commit."""
        membership.heartbeat(
            self.store_path,
            self.group,
            self.consumer_id,
            self._subscribed,
            queues=self._reported,
            started_ms=self._started_ms,
        )
        self._rebalance()
        with self._lock:
            owned = list(self._owned.values())
        for state in owned:
            self._commit(state)

    def _rebalance(self) -> None:
        store = self._store
        members = membership.live_members(self.store_path, self.group, self.member_timeout_s)
        queue_counts = {info.name: info.queues for info in store.topics()}
        target: set[tuple[str, int]] = set()
        for topic in self._subscribed:
            count = queue_counts.get(topic)
            if count is None:
                if topic == self.retry_topic:
                    self._ensure_topic(store, topic)
                    count = 1
                else:
                    continue
            ids = [m.consumer_id for m in members if topic in m.topics]
            if self.consumer_id not in ids:
                ids.append(self.consumer_id)
            target.update(
                membership.allocate([(topic, q) for q in range(count)], ids, self.consumer_id)
            )
        with self._lock:
            current = set(self._owned)
        for key in sorted(current - target):
            with self._lock:
                state = self._owned.pop(key)
            self._commit(state, releasing=True)
            log.info("consumer %s: released %s/%d", self.consumer_id, *key)
        for key in sorted(target - current):
            state = self._take(*key)
            if state is not None:
                with self._lock:
                    self._owned[key] = state
                log.info("consumer %s: took %s/%d at %d", self.consumer_id, *key, state.position)
        assigned = sorted(target)
        if assigned != self._reported:
            self._reported = assigned
            membership.heartbeat(
                self.store_path,
                self.group,
                self.consumer_id,
                self._subscribed,
                queues=assigned,
                started_ms=self._started_ms,
            )

    def _take(self, topic: str, queue: int) -> _QueueState | None:
        store = self._store
        try:
            committed = store.committed_offset(self.group, topic, queue)
            low, _ = store.queue_range(topic, queue)
        except (TopicNotFoundError, QueueNotFoundError):
            return None
        return _QueueState(topic, queue, group_position(committed, low), committed)

    def _commit(self, state: _QueueState, releasing: bool = False) -> None:
        """Commit the queue's lowest unfinished offset, or notice an operator's reset."""
        store = self._store
        with self._lock:
            offset = state.lowest_unfinished()
            expected = state.committed
            epoch = state.epoch
        if releasing and offset == expected:
            return
        try:
            # An offset that did not move is committed too (the store notes the commit's
            # time without a history row): a stuck consumer reads STALL, not STOP.
            try:
                store.commit_offset(
                    self.group,
                    state.topic,
                    state.queue,
                    offset,
                    who=self.consumer_id,
                    reason="consume",
                    expected=expected,
                )
            except OffsetConflictError as error:
                conflict = error.current
            else:
                with self._lock:
                    if state.epoch == epoch:
                        state.committed = offset
                return
        except (TopicNotFoundError, QueueNotFoundError):
            with self._lock:
                if self._owned.get((state.topic, state.queue)) is state:
                    del self._owned[(state.topic, state.queue)]
            return
        if releasing:
            return
        position = conflict
        if position is None:  # the offset is gone (topic recreated?): start at the minimum
            position = store.queue_range(state.topic, state.queue)[0]
        log.warning(
            "consumer %s: the offset of %s on %s/%d was changed to %s by someone else; "
            "continuing from there",
            self.consumer_id,
            self.group,
            state.topic,
            state.queue,
            conflict,
        )
        with self._lock:
            state.restart_at(position, conflict)

    def _fetch(self) -> bool:
        """Read from every held queue with room in its window; True if anything was read."""
        store = self._store
        now = clock.now_ms()
        busy = False
        with self._lock:
            owned = list(self._owned.values())
        for state in owned:
            with self._lock:
                epoch = state.epoch
                room = self.max_window - len(state.window)
                position = state.position
                due = []
                if state.delayed and min(item[0] for item in state.delayed) <= now:
                    due = [item for item in state.delayed if item[0] <= now]
                    state.delayed = [item for item in state.delayed if item[0] > now]
            for _, message in due:
                self._submit(state, epoch, message)
            if room <= 0:
                continue
            try:
                result = store.read_result(
                    state.topic, state.queue, position, min(self.pull_batch, room)
                )
            except (TopicNotFoundError, QueueNotFoundError):
                with self._lock:
                    if self._owned.get((state.topic, state.queue)) is state:
                        del self._owned[(state.topic, state.queue)]
                continue
            if result.next_offset == position:
                continue
            busy = True
            is_retry = state.topic == self.retry_topic
            ready = []
            with self._lock:
                if state.epoch != epoch or state.position != position:
                    continue  # reset meanwhile: read again from the new position
                for message in result.messages:
                    state.window[message.queue_offset] = False
                    due_ms = _retry_at(message) if is_retry else 0
                    if due_ms > now:
                        state.delayed.append((due_ms, message))
                    else:
                        ready.append(message)
                state.position = result.next_offset
            for message in ready:
                self._submit(state, epoch, message)
        return busy

    def _until_due(self) -> float:
        """Seconds until the first delayed retry message is due (1 hour if none)."""
        with self._lock:
            dues = [item[0] for s in self._owned.values() for item in s.delayed]
        if not dues:
            return 3600.0
        return max(0.0, (min(dues) - clock.now_ms()) / 1000)

    def _submit(self, state: _QueueState, epoch: int, message: StoredMessage) -> None:
        self._executor.submit(self._handle, state, epoch, message)

    # -------------------------------------------------------------- handling

    def _current(self, state: _QueueState, epoch: int) -> bool:
        with self._lock:
            return (
                state.epoch == epoch
                and self._owned.get((state.topic, state.queue)) is state
                and not self._stopping.is_set()
            )

    def _handle(self, state: _QueueState, epoch: int, message: StoredMessage) -> None:
        if not self._current(state, epoch):
            return  # the queue was given up or reset: someone reads it again
        self._local.in_handler = True
        try:
            self.handler(_as_delivered(message, self.retry_topic))
        except Exception as error:
            with self._lock:
                self.failed += 1
            log.warning(
                "consumer %s: handler failed on %s (%s/%d@%d): %r",
                self.consumer_id,
                message.message_id,
                message.topic,
                message.queue,
                message.queue_offset,
                error,
            )
            if not self._current(state, epoch) or not self._forward(message, error):
                return
        else:
            with self._lock:
                self.handled += 1
        finally:
            self._local.in_handler = False
        self._finish(state, epoch, message.queue_offset)

    def _finish(self, state: _QueueState, epoch: int, offset: int) -> None:
        with self._lock:
            if state.epoch != epoch or offset not in state.window:
                return
            state.window[offset] = True
            was_full = len(state.window) >= self.max_window
            state.lowest_unfinished()  # drop the finished head of the window
        if was_full:
            self._wake.set()

    def _forward(self, message: StoredMessage, error: BaseException) -> bool:
        """Send a failed message to the retry topic (or the DLQ); False if it could not."""
        topic, body, kwargs = self._failure_copy(message, error)
        attempt = 0
        while True:
            try:
                if topic == self.dlq_topic:
                    self._ensure_topic(self._store, topic)
                self._store.append(topic, body, **kwargs)
                return True
            except StoreClosedError:
                return False
            except StoreError:
                log.exception(
                    "consumer %s: could not send %s to %s",
                    self.consumer_id,
                    message.message_id,
                    topic,
                )
                delay = _FORWARD_BACKOFF_S[min(attempt, len(_FORWARD_BACKOFF_S) - 1)]
                attempt += 1
                if self._stopping.wait(delay):
                    return False

    def _failure_copy(self, message: StoredMessage, error: BaseException):
        properties = dict(message.properties)
        properties.pop(DEDUP_PROPERTY, None)  # the copy is a new message, not a resend
        if message.topic != self.retry_topic or ORIGIN_TOPIC not in properties:
            properties.update(
                {
                    ORIGIN_TOPIC: message.topic,
                    ORIGIN_QUEUE: str(message.queue),
                    ORIGIN_QUEUE_OFFSET: str(message.queue_offset),
                    ORIGIN_MESSAGE_ID: message.message_id,
                }
            )
        retries_done = (
            _int_property(message.properties, RETRY_COUNT)
            if (message.topic == self.retry_topic)
            else 0
        )
        properties[RETRY_COUNT] = str(retries_done + 1)
        properties[LAST_ERROR] = _error_text(error)
        if retries_done >= self.max_retries:
            properties.pop(RETRY_AT_MS, None)
            topic = self.dlq_topic
        else:
            delay = self.retry_delays_s[min(retries_done, len(self.retry_delays_s) - 1)]
            properties[RETRY_AT_MS] = str(clock.now_ms() + int(delay * 1000))
            topic = self.retry_topic
        kwargs = {"properties": properties}
        if message.keys:
            kwargs["key"] = list(message.keys)
        if message.tag is not None:
            kwargs["tag"] = message.tag
        return topic, message.body, kwargs


def _retry_at(message: StoredMessage) -> int:
    return _int_property(message.properties, RETRY_AT_MS)


def _int_property(properties: dict[str, str], name: str) -> int:
    try:
        return int(properties.get(name, "0"))
    except ValueError:
        return 0


def _error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    for separator in ("\x01", "\x02", "\x1f"):
        text = text.replace(separator, " ")
    return text[:_MAX_ERROR_CHARS]


def _as_delivered(message: StoredMessage, retry_topic_name: str) -> StoredMessage:
    """A retry-topic message as the handler sees it: with its origin restored."""
    if message.topic != retry_topic_name:
        return message
    properties = message.properties
    try:
        return message._replace(
            topic=properties[ORIGIN_TOPIC],
            queue=int(properties[ORIGIN_QUEUE]),
            queue_offset=int(properties[ORIGIN_QUEUE_OFFSET]),
            message_id=properties[ORIGIN_MESSAGE_ID],
        )
    except (KeyError, ValueError):
        return message


__all__ = ["Consumer", "DEFAULT_RETRY_DELAYS_S"]
