"""Consumer groups' committed offsets and their history.

A part of ``MessageStore`` (store.py), which mixes it in; it uses the store's state.
"""

from __future__ import annotations

from . import fileio
from .errors import (
    OffsetConflictError,
    OffsetOutOfRangeError,
    StoreError,
    StoreFailedError,
)
from .names import check_name
from .offsets import OffsetChange

_ANY = object()


class GroupOffsets:
    """Consumer groups' committed offsets and their history."""

    def commit_offset(
        self,
        group: str,
        topic: str,
        queue: int,
        offset: int,
        who: str = "consumer",
        reason: str = "commit",
        expected: int | None | object = _ANY,
    ) -> OffsetChange | None:
        """Durably record ``offset`` (the next to consume) as the group's position.

        Every change is kept in the group's history with ``who`` and ``reason``.
        With ``expected``, the commit happens only if the committed offset is still that
        value (None: never committed), else OffsetConflictError: how a consumer notices
        that an operator reset the offsets under it. Raises OffsetOutOfRangeError for
        an offset below 0 or above the queue's max.
        """
        check_name(group, "group")
        consume_queue = self._queue(topic, queue)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise OffsetOutOfRangeError(f"an offset is an integer ≥ 0, not {offset!r}")
        if offset > consume_queue.max_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the end of {topic}/{queue} "
                f"(max offset {consume_queue.max_offset})"
            )
        with self._exclusive():
            current = self._offsets.get(group, topic, queue)
            if expected is not _ANY and current != expected:
                raise OffsetConflictError(
                    f"the offset of {group} on {topic}/{queue} is {current}, not {expected}: "
                    "someone else changed it (an operator's reset?); continue from it",
                    current,
                )
            try:
                change = self._offsets.commit(
                    group, topic, queue, offset, who, reason, durable=False
                )
                touched = change is None and self._offsets.touch(group, topic, queue, durable=False)
            except OSError as error:
                self._fail(error)
                raise StoreFailedError(f"saving the offset failed ({error})") from error
            if change is not None or touched:
                self._publish(offsets_version=self._seen.offsets_version + 1)
        if change is not None or touched:
            self._sync_offsets()
        return change

    def commit_offsets(
        self,
        group: str,
        topic: str,
        offsets: dict[int, int],
        expected: dict[int, int | None] | None = None,
        who: str = "operator",
        reason: str = "reset",
    ) -> list[OffsetChange]:
        """Commit several queues' offsets at once: all of them, or none.

        With ``expected`` (queue → the committed offset seen, None for never), nothing
        is written if any queue's offset differs (OffsetConflictError): how an operator's
        reset is applied only from the state it was previewed on.
        """
        check_name(group, "group")
        if not isinstance(offsets, dict) or not offsets:
            raise StoreError("offsets must map queue ids to offsets")
        for queue, offset in offsets.items():
            consume_queue = self._queue(topic, queue)
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise OffsetOutOfRangeError(f"an offset is an integer ≥ 0, not {offset!r}")
            if offset > consume_queue.max_offset:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is past the end of {topic}/{queue} "
                    f"(max offset {consume_queue.max_offset})"
                )
        with self._exclusive():
            for queue, seen in (expected or {}).items():
                current = self._offsets.get(group, topic, queue)
                if current != seen:
                    raise OffsetConflictError(
                        f"the offset of {group} on {topic}/{queue} is now {current}, not "
                        f"{seen}: it moved since it was read; nothing was changed",
                        current,
                    )
            try:
                changes = self._offsets.commit_many(
                    group, topic, offsets, who, reason, durable=False
                )
            except OSError as error:
                self._fail(error)
                raise StoreFailedError(f"saving the offsets failed ({error})") from error
            if changes:
                self._publish(offsets_version=self._seen.offsets_version + 1)
        if changes:
            self._sync_offsets()
        return changes

    def _sync_offsets(self) -> None:
        """fsync the offsets journal, after letting go of the write lock: appends need
        not wait for a commit's fsync (the commit returns once it is durable)."""
        try:
            self._offsets.sync()
        except OSError as error:
            self._fail(error)
            raise StoreFailedError(f"saving the offset failed ({error})") from error

    def delete_group(self, group: str) -> bool:
        """Forget a group: its committed offsets, their history and its member files.

        Its consumers, if any still run, start over from the queues' first offsets.
        Returns False when the store knew nothing of the group.
        """
        check_name(group, "group")
        with self._exclusive():
            try:
                dropped = self._offsets.drop_group(group)
            except OSError as error:
                self._fail(error)
                raise StoreFailedError(f"saving the offsets failed ({error})") from error
            fileio.remove_tree(self.path / "groups" / group)
            if dropped:
                self._publish(offsets_version=self._seen.offsets_version + 1)
            return dropped

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        """The group's committed offset on a queue, or None if it never committed."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        self._queue(topic, queue)
        return self._offsets.get(group, topic, queue)

    def committed_offsets(self, group: str, topic: str | None = None) -> dict[tuple[str, int], int]:
        """Every committed offset of the group, by (topic, queue); only ``topic``'s with
        it. Empty for a group that never committed. One call instead of one
        ``committed_offset`` per queue, for pages that show many queues' lag."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        return self._offsets.group_positions(group, topic)

    def last_commit_times(self, group: str) -> dict[tuple[str, int], int]:
        """When the group last committed on each (topic, queue), in ms: its latest offset
        change, or a later commit of the same offset (seen at most every few seconds).
        A consumer that commits without moving is stalled; one that stopped committing
        is stopped: Burrow's STALL and STOP."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        return self._offsets.group_commit_times(group)

    def offset_history(
        self, group: str, topic: str | None = None, queue: int | None = None, limit: int = 100
    ) -> list[OffsetChange]:
        """The group's offset changes, newest first, optionally for one topic or queue."""
        check_name(group, "group")
        self._check_open()
        self._follow()
        history = self._offsets.history.get(group)
        return [] if history is None else history.newest(topic, queue, limit)

    def groups(self) -> list[str]:
        """Every group that has committed an offset, sorted."""
        self._check_open()
        self._follow()
        return sorted(self._offsets.groups())
