"""Topics and queues: create, delete, add, freeze, unfreeze, remove.

A part of ``MessageStore`` (store.py), which mixes it in; it uses the store's state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace

from . import clock, fileio
from .consumequeue import ConsumeQueue
from .errors import (
    InvalidMessageError,
    QueueInUseError,
    QueueNotFoundError,
    StoreError,
    TopicExistsError,
    TopicNotFoundError,
)
from .metadata import LAYOUT_FILES, LAYOUT_SHARED, LAYOUTS, TopicInfo
from .names import check_name
from .topics import Topic
from .topicsettings import check_changes, effective

#: A topic whose queues have files of their own has at most this many queues.
MAX_QUEUES_PER_TOPIC = 1024
#: A shared topic (all queues' entries in shared block files) has at most this many.
MAX_SHARED_QUEUES = 1 << 21


class TopicAdmin:
    """Topics and queues: create, delete, add, freeze, unfreeze, remove."""

    def create_topic(self, name: str, queues: int = 4, layout: str | None = None) -> TopicInfo:
        """Create a topic with ``queues`` queues; raise TopicExistsError if it exists.

        ``layout`` "files" gives every queue files of its own (at most 1024 queues);
        "shared" keeps every queue's entries in blocks of a few shared files (up to
        2,097,152 queues). By default a topic is shared above ``shared_layout_above``.
        """
        return self._create_topic(name, queues, layout, streams=False)

    def create_stream_topic(self, name: str, queues: int = 8) -> TopicInfo:
        """Create a topic whose messages are the events of streams (``append_event``),
        with an event index; raise TopicExistsError if a topic of that name exists.

        A stream's events all go to one queue, chosen by the hash of its id, so the
        queue's order is the stream's order. Ordinary ``append`` refuses such a topic.
        """
        return self._create_topic(name, queues, None, streams=True)

    def _create_topic(self, name: str, queues: int, layout: str | None, streams: bool) -> TopicInfo:
        check_name(name, "topic")
        if layout is None:
            above = self.config.shared_layout_above
            layout = LAYOUT_SHARED if isinstance(queues, int) and queues > above else LAYOUT_FILES
        if layout not in LAYOUTS:
            raise StoreError(f"a topic's layout is one of {', '.join(LAYOUTS)}, not {layout!r}")
        self._check_queue_count(queues, layout)
        with self._exclusive():
            if name in self._registry.topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            info = TopicInfo(
                name,
                queues,
                clock.now_ms(),
                self.commitlog.tail,
                id=self._table.next_id(),
                streams=streams,
            )
            if layout == LAYOUT_SHARED:
                info.layout = LAYOUT_SHARED
                info.block_entries = self.config.shared_block_entries
                info.blocks_per_file = self.config.shared_blocks_per_file
            # Offsets left by a deleted namesake (its deletion was cut short) are not this
            # topic's: its groups start from scratch.
            self._offsets.drop_topic(name)
            try:
                state = self._registry.create(info)
                if streams:
                    self._streams.create_index(state)
                self._table.save_changed(put=info)
            except BaseException:
                self._undo_create(name)
                raise
            self._publish(
                topics_version=self._seen.topics_version + 1,
                offsets_version=self._seen.offsets_version + 1,
            )
            return self._topic_copy(info)

    def _undo_create(self, name: str) -> None:
        """Take back a topic's queues whose creation could not be finished."""
        self._streams.forget(name)
        if name in self._registry.topics:
            self._registry.close_topic(name)
        fileio.remove_tree(self.path / "consumequeue" / name)

    def topics(self) -> list[TopicInfo]:
        """Every topic, sorted by name."""
        self._check_open()
        self._follow()
        return [self._topic_copy(t.info) for _, t in sorted(self._registry.topics.items())]

    def topic(self, name: str) -> TopicInfo:
        return self._topic_copy(self._topic(name).info)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its queues and the groups' offsets on it.

        Its records stay in the commit log until retention deletes their segments.
        """
        check_name(name, "topic")
        # The flush lock first (as flushes take it): a flush must not fsync a queue file
        # closed here.
        with self._flush_lock, self._exclusive():
            self._topic(name)
            self._table.save_changed(remove=name)  # from here on the topic is gone
            self._registry.close_topic(name)
            self._streams.forget(name)
            fileio.remove_tree(self.path / "consumequeue" / name)
            with contextlib.suppress(OSError):
                fileio.fsync_dir(self.path / "consumequeue")
                # Offsets left behind are dropped when a topic of this name is created
                # again, and by the next recovery.
                self._offsets.drop_topic(name)
            self._publish(
                topics_version=self._seen.topics_version + 1,
                offsets_version=self._seen.offsets_version + 1,
            )

    def add_queues(self, topic: str, count: int) -> TopicInfo:
        """Add ``count`` queues at the end of ``topic`` (ids continue from the last)."""
        self._check_queue_count(count, LAYOUT_SHARED)
        with self._exclusive():
            state = self._topic(topic)
            limit = queue_limit(state.info.layout)
            if state.info.queues + count > limit:
                hint = (
                    "; a topic created with layout='shared' takes more"
                    if state.info.layout == LAYOUT_FILES
                    else ""
                )
                raise StoreError(
                    f"topic {topic!r} has {state.info.queues} queues; adding {count} would pass "
                    f"the limit of {limit}{hint}"
                )
            first = state.info.queues
            # A removal cut short may have left offsets on these ids.
            self._offsets.drop_queues(topic, range(first, first + count))
            since = self._queue_since(state.info) + [self.commitlog.tail] * count
            try:
                self._registry.add_queues(state, count)
                self._change_topic(
                    state, queues=first + count, queue_since=since, offsets_changed=True
                )
            except BaseException:
                self._registry.remove_added_queues(state, first)
                raise
            return self._topic_copy(state.info)

    def freeze_queue(self, topic: str, queue: int) -> TopicInfo:
        """Stop new appends to a queue; reads and consumption go on."""
        with self._exclusive():
            state = self._topic(topic)
            self._queue(topic, queue)
            if queue not in state.info.frozen:
                self._change_topic(state, frozen=sorted([*state.info.frozen, queue]))
            return self._topic_copy(state.info)

    def unfreeze_queue(self, topic: str, queue: int) -> TopicInfo:
        """Let a frozen queue take new appends again."""
        with self._exclusive():
            state = self._topic(topic)
            self._queue(topic, queue)
            if queue in state.info.frozen:
                self._change_topic(state, frozen=[q for q in state.info.frozen if q != queue])
            return self._topic_copy(state.info)

    def remove_queue(self, topic: str, queue: int) -> TopicInfo:
        """Remove the topic's last queue, once frozen and consumed to the end by every group.

        Otherwise QueueInUseError says why, naming each group that is behind and by how
        many messages (EQueue's safe scale-down). Its records stay in the commit log
        until retention deletes them; the groups' offsets on it are forgotten.
        """
        with self._flush_lock, self._exclusive():
            state = self._topic(topic)
            consume_queue = self._queue(topic, queue)
            last = state.info.queues - 1
            if queue != last:
                raise QueueInUseError(
                    f"only the last queue of {topic!r} (queue {last}) can be removed; "
                    "freeze the others to stop writes to them"
                )
            if last == 0:
                raise QueueInUseError(f"queue 0 is the only queue of {topic!r}; delete the topic")
            if queue not in state.info.frozen:
                raise QueueInUseError(
                    f"queue {queue} of {topic!r} is not frozen: freeze it, let the groups "
                    "consume it to the end, then remove it"
                )
            behind = self._groups_behind(topic, queue, consume_queue.max_offset)
            if behind:
                listed = ", ".join(f"{group} ({count} behind)" for group, count in behind)
                raise QueueInUseError(
                    f"queue {queue} of {topic!r} still has unconsumed messages for: {listed}"
                )
            self._change_topic(  # from here on the queue is gone
                state,
                queues=last,
                frozen=[q for q in state.info.frozen if q != queue],
                queue_since=self._queue_since(state.info)[:last],
                queue_generation=self._removed_generation(state.info, queue),
                offsets_changed=True,
            )
            self._registry.remove_last_queue(state)
            with contextlib.suppress(OSError):  # else dropped when the queue comes back
                self._offsets.drop_queue(topic, queue)
            return self._topic_copy(state.info)

    def _groups_behind(self, topic: str, queue: int, end: int) -> list[tuple[str, int]]:
        """Groups consuming ``topic`` that have not reached ``end`` on ``queue``."""
        groups = sorted(self._offsets.groups_on(topic))
        behind = []
        for group in groups:
            committed = self._offsets.get(group, topic, queue) or 0
            if committed < end:
                behind.append((group, end - committed))
        return behind

    @staticmethod
    def _queue_since(info: TopicInfo) -> list[int]:
        """Every queue's ``since`` (``info.since`` of each, computed as a whole)."""
        floor, kept = info.created_offset, info.queue_since[: info.queues]
        since = [offset if offset > floor else floor for offset in kept]
        return since + [floor] * (info.queues - len(since))

    @staticmethod
    def _removed_generation(info: TopicInfo, queue: int) -> list[int]:
        """``queue_generation`` once ``queue`` is removed: one more for its id, so that a
        queue added back under it is a new incarnation to every process."""
        generations = list(info.queue_generation)
        generations += [0] * (queue + 1 - len(generations))
        generations[queue] += 1
        return generations

    def set_topic_settings(self, topic: str, changes: Mapping[str, int | None]) -> TopicInfo:
        """Set some of a topic's settings (topicsettings.py; None: back to the store's
        default) and return the topic. InvalidSettingError for an unknown name or a
        value out of bounds; nothing is changed then. Every process sees the change."""
        checked = check_changes(changes)
        with self._exclusive():
            state = self._topic(topic)
            settings = dict(state.info.settings)
            for name, value in checked.items():
                if value is None:
                    settings.pop(name, None)
                else:
                    settings[name] = value
            if settings != state.info.settings:
                self._change_topic(state, settings=settings)
            return self._topic_copy(state.info)

    def topic_settings(self, topic: str) -> dict[str, int | float]:
        """Every setting's value for ``topic``: its own, else the store's default."""
        self._check_open()
        self._follow()
        return effective(self._topic(topic).info.settings, self.config)

    def _change_topic(self, state: Topic, offsets_changed: bool = False, **changes) -> None:
        """Save a topic's new metadata and tell the other processes (caller holds the lock)."""
        info = replace(state.info, **changes)
        self._table.save_changed(put=info)
        state.info = info
        published = {"topics_version": self._seen.topics_version + 1}
        if offsets_changed:
            published["offsets_version"] = self._seen.offsets_version + 1
        self._publish(**published)

    @staticmethod
    def _topic_copy(info: TopicInfo) -> TopicInfo:
        # A caller's copy, so that changing it changes nothing here. Copied field by
        # field through __dict__: dataclasses.replace costs ~6 µs, too much for
        # topics() on a store with thousands of topics.
        copy = object.__new__(TopicInfo)
        copy.__dict__.update(info.__dict__)
        copy.frozen = list(info.frozen)
        copy.queue_since = list(info.queue_since)
        copy.queue_generation = list(info.queue_generation)
        copy.settings = dict(info.settings)
        return copy

    @staticmethod
    def _check_queue_count(queues: object, layout: str = LAYOUT_FILES) -> None:
        if not isinstance(queues, int) or isinstance(queues, bool):
            raise InvalidMessageError("the number of queues must be an integer")
        limit = queue_limit(layout)
        if not 1 <= queues <= limit:
            raise StoreError(f"a topic has 1 to {limit} queues, not {queues}")

    def _topic(self, name: str) -> Topic:
        self._check_open()
        state = self._registry.topics.get(name)
        if state is None:
            self._follow()
            state = self._registry.topics.get(name)
        if state is None:
            check_name(name, "topic")
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        return state

    def _queue(self, topic: str, queue: int) -> ConsumeQueue:
        state = self._topic(topic)
        if not isinstance(queue, int) or isinstance(queue, bool):
            raise QueueNotFoundError(f"a queue id is an integer, not {queue!r}")
        if not 0 <= queue < len(state.queues):
            raise QueueNotFoundError(
                f"topic {topic!r} has queues 0 to {len(state.queues) - 1}; "
                f"there is no queue {queue}"
            )
        return state.queues[queue]


def queue_limit(layout: str) -> int:
    """The most queues a topic of ``layout`` can have."""
    return MAX_SHARED_QUEUES if layout == LAYOUT_SHARED else MAX_QUEUES_PER_TOPIC
