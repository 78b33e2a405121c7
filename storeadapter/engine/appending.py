"""Appends of messages: ``append`` and ``append_batch``.

``MessageStore``'s public append methods (store.py mixes this class in). Each one finds
the topic and hands the messages to the ``Writer`` (writer.py), which validates and
prepares them, writes them under the write lock and publishes them; plain bodies that
fit go its fast path unprepared; a single message, a list of bodies or a prepared dict
batch first to the native append (nativeappend.py); an open store with one binds
``append`` to the native call, which calls ``_append_long_way`` for what it declines.
What this class uses of the store: ``_registry``, ``_topic``, ``_writer`` and
``_appender``. (Appends to event streams are in store.py.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .results import AppendResult, Message

_BYTES_ONLY = {bytes}


class Appending:
    """Appends of messages: ``append`` and ``append_batch``."""

    def append(
        self,
        topic: str,
        body: bytes | str,
        key: str | list[str] | None = None,
        tag: str | None = None,
        queue: int | None = None,
        properties: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
    ) -> AppendResult:
        """Append one message and return where it landed.

        The queue is ``queue`` if given, else chosen by the key's hash, else round-robin.
        With ``dedup_id``, a message with the same id stored in this topic within
        ``dedup_window_s`` (by any process, before or after a restart) is not written
        again: its result comes back with status DUPLICATE.
        In sync mode this returns after an fsync covers the record (status OK) or after
        ``flush_timeout_ms`` (status FLUSH_TIMEOUT). Raises MessageTooLargeError,
        InvalidMessageError, TopicNotFoundError, QueueNotFoundError, StoreFailedError.
        """
        # One native call (nativeappend.py) for every message without a dedup id; the
        # rest (and whatever it declines) back here, in ``_append_long_way``. An open store
        # with a core binds its ``append`` to that call (store.py), skipping this frame.
        appender = self._appender
        if appender is not None:
            return appender.append_or_long_way(topic, body, key, tag, queue, properties, dedup_id)
        return self._append_long_way(topic, body, key, tag, queue, properties, dedup_id)

    def _append_long_way(
        self,
        topic: str,
        body: bytes | str,
        key: str | list[str] | None,
        tag: str | None,
        queue: int | None,
        properties: Mapping[str, str] | None,
        dedup_id: str | None,
    ) -> AppendResult:
        """``append`` in Python: what the native call declines, or every message when
        the store has no native append (sync mode, the flock pen)."""
        plain = (
            type(body) is bytes
            and key is None
            and tag is None
            and queue is None
            and not properties
            and dedup_id is None
        )
        state = self._registry.topics.get(topic) or self._topic(topic)
        writer = self._writer
        if plain and len(body) <= writer.plain_body_limit(state):
            return writer.append_prepared(state, [body], plain=True)[0]
        prepared = writer.prepare(state, body, key, tag, queue, properties, None, dedup_id)
        return writer.append_prepared(state, [prepared])[0]

    def append_batch(
        self, topic: str, messages: Iterable[Message | Mapping | bytes | str]
    ) -> list[AppendResult]:
        """Append many messages to one topic in one locked write (the fast path).

        Each item is a Message, a dict with Message's fields, or a body (bytes or str).
        Every message is validated before any is written: one bad message writes none.
        """
        state = self._topic(topic)
        if type(messages) is not list:
            messages = list(messages)
        if not messages:
            return []
        appender = self._appender
        if appender is not None and state.blocks is not None:
            # A shared topic's batch: prepared and written in one native call
            # (nativeappend.py), without a prepared tuple per message; None: declined.
            results = appender.append_messages(state, messages)
            if results is not None:
                return results
        writer = self._writer
        limit = writer.plain_body_limit(state)
        if set(map(type, messages)) == _BYTES_ONLY and max(map(len, messages)) <= limit:
            # One native call for a plain batch (nativeappend.py); None: declined.
            appender = self._appender
            if appender is not None:
                results = appender.append_batch(state, messages)
                if results is not None:
                    return results
            return writer.append_prepared(state, messages, plain=True)
        prepared = writer.prepare_batch(state, messages, limit)
        # One native call for a batch of prepared dict items (nativeappend.py); None:
        # declined (a dedup id, a roll, a new queue file...).
        appender = self._appender
        if appender is not None:
            results = appender.append_items(state, prepared)
            if results is not None:
                return results
        return writer.append_prepared(state, prepared)
