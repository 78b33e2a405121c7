"""The open topics of a store: their metadata and consume queues, kept in step with
``topics.json`` as this or another process changes it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import fileio
from .blockqueue import BlockQueue, BlockStore
from .consumequeue import ConsumeQueue
from .dataplane import BlockIndex
from .handles import HandleCache
from .metadata import LAYOUT_SHARED, TopicInfo, TopicTable
from .queueends import QueueEnds
from .segment import is_segment_name

BLOCKS_DIR = "blocks"


class LazyQueues:
    """A shared topic's queues as a sequence whose items are made on first use, so that
    a topic of a million queues costs nothing per queue until a queue is used.

    ``_at`` holds each queue's object by id (None until made): the native shared read
    (shared_read.rs) reads it by index, without an int made and hashed per queue;
    ``_made`` the same objects by id in the order they were made. A queue's ends are
    kept in the topic's block index (``ends``), not in its object: the shared batch
    (shared_core.rs) uses a queue, and loads it, without making its object, so the queues
    used so far (``made``) are those made and those the index has loaded. Each object
    made is noted in the index too (``set_made``): the batch loads a queue without a
    Python call only when none is made (its load would find it empty)."""

    __slots__ = ("_at", "_count", "_made", "_make", "ends")

    def __init__(
        self, count: int, make: Callable[[int], BlockQueue], ends: BlockIndex | None = None
    ) -> None:
        self._count = count
        self._make = make
        self._made: dict[int, BlockQueue] = {}
        self._at: list[BlockQueue | None] = [None] * count
        self.ends = ends

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, queue_id: int) -> BlockQueue:
        if not 0 <= queue_id < self._count:
            raise IndexError(queue_id)
        queue = self._at[queue_id]
        if queue is None:
            queue = self._at[queue_id] = self._made[queue_id] = self._make(queue_id)
            if self.ends is not None:
                self.ends.set_made(queue_id, True)
        return queue

    def __iter__(self):
        for queue_id in range(self._count):
            yield self[queue_id]

    def made_at(self, queue_id: int) -> BlockQueue | None:
        """Queue ``queue_id``'s object if made, else None (none is made)."""
        return self._at[queue_id]

    def made(self) -> list[BlockQueue]:
        """The queues used so far: those whose objects were made, and those the block
        index has loaded without one (their objects made now)."""
        if self.ends is None:
            return list(self._made.values())
        made = self._made
        count = self._count
        unmade = [q for q in self.ends.loaded_queues() if q < count and q not in made]
        return [*made.values(), *(self[q] for q in unmade)]

    def objects(self) -> list[BlockQueue]:
        """The queue objects made so far (none made for the others)."""
        return list(self._made.values())

    def forget(self, queue_id: int) -> None:
        """Close queue ``queue_id``'s object if made and forget its ends: the next use
        makes a new one and loads it (another incarnation of the queue)."""
        queue = self._made.pop(queue_id, None)
        if queue is not None:
            self._at[queue_id] = None
            queue.close()
        if self.ends is not None:
            self.ends.forget_ends(queue_id)

    def append(self, queue: BlockQueue) -> None:
        if self.ends is not None:
            self.ends.set_made(self._count, True)
        self._made[self._count] = queue
        self._at.append(queue)
        self._count += 1

    def grow(self, count: int) -> None:
        """``count`` more queues at the end, made on first use as the others."""
        self._at.extend([None] * count)
        self._count += count

    def pop(self) -> BlockQueue:
        """Take the last queue off (its ends forgotten: a queue added later under its id
        is loaded anew)."""
        queue = self[self._count - 1]
        del self._made[self._count - 1]
        self._at.pop()
        self._count -= 1
        if self.ends is not None:
            self.ends.forget_ends(self._count)
        return queue


class Topic:
    __slots__ = ("_info", "name_bytes", "queues", "round_robin", "_writable", "blocks", "ends")

    def __init__(
        self,
        info: TopicInfo,
        queues: list[ConsumeQueue] | LazyQueues,
        blocks: BlockStore | None = None,
        ends: QueueEnds | None = None,
    ) -> None:
        self.name_bytes = info.name.encode()
        self.queues = queues
        self.round_robin = 0
        self.blocks = blocks  # a shared topic's block store
        self.ends = ends  # the witness of a topic with files per queue
        self.info = info

    def made_queues(self) -> list:
        """The queues used so far (all of a topic with files per queue), as objects."""
        queues = self.queues
        return queues.made() if isinstance(queues, LazyQueues) else list(queues)

    def queue_objects(self) -> list:
        """The queue objects made so far (none is made for the others)."""
        queues = self.queues
        return queues.objects() if isinstance(queues, LazyQueues) else list(queues)

    @property
    def info(self) -> TopicInfo:
        return self._info

    @info.setter
    def info(self, info: TopicInfo) -> None:
        self._info = info
        self._writable: list[int] | None = None  # made again on first use

    @property
    def writable(self) -> list[int]:
        """The queues not frozen, ascending: made on first use (a million ints are ~0.1 s
        of CPU, which an open, and a writer naming each message's queue, would spend for
        nothing). The native append reads the slot, and this when it is None."""
        writable = self._writable
        if writable is None:
            info = self._info
            frozen = set(info.frozen)
            writable = (
                [q for q in range(info.queues) if q not in frozen]
                if frozen
                else list(range(info.queues))
            )
            self._writable = writable
        return writable


class TopicRegistry:
    """The queues: topic name → open ``Topic``; resolves records to their queues.

    It owns the open queue files (through its ``HandleCache``) and the queues written
    since the last flush (``dirty``: the next flush takes them and fsyncs their files).
    """

    def __init__(self, root: Path, entries_per_file: int, max_open_files: int) -> None:
        self.root = root
        self.entries_per_file = entries_per_file
        self.handles = HandleCache(max_open_files)
        # Queues (a shared topic's blocks: its flush target) with writes no flush took yet.
        self.dirty: set = set()
        self.topics: dict[str, Topic] = {}
        self._by_bytes: dict[bytes, Topic] = {}
        self.by_id: dict[int, Topic] = {}
        # The commit-log tail this process has followed to (set by the store).
        self.tail_source: Callable[[], int] | None = None
        # Called with each queue when it is first loaded (see ConsumeQueue.on_load).
        self.on_load: Callable[[ConsumeQueue], None] | None = None
        self._on_load = self._loaded  # one bound method shared by every queue
        # (shared topic, blocks) whose entries a repairing load found lost and erased.
        self.damage: list[tuple[TopicInfo, int]] = []

    def load(self, table: TopicTable, repair: bool) -> int | None:
        """Open every topic in ``table``.

        With ``repair`` (this process is alone), leftover directories of deleted topics
        are removed and a queue whose directory is missing gets it back; the return
        value is then the commit-log offset a rebuild must start from, if any queue's
        files were missing.
        """
        fileio.make_dir(self.root, exist_ok=True)
        if repair:
            for leftover in self.root.iterdir():
                if leftover.name not in table.topics:
                    fileio.remove_tree(leftover)
        rebuild_from = None
        for info in table.topics.values():
            if info.layout == LAYOUT_SHARED:
                topic = self._shared_topic(info)
                if repair:
                    lost_files = topic.blocks.lost()
                    # Whose entries were lost is not known: rebuild the whole topic.
                    if (lost_files or topic.blocks.damaged) and (
                        rebuild_from is None or info.created_offset < rebuild_from
                    ):
                        rebuild_from = info.created_offset
                    if lost_files:
                        topic.blocks.create_first_file()
                    damaged = topic.blocks.erase_damaged()
                    if damaged:
                        self.damage.append((info, damaged))
                    topic.blocks.erase_unallocated()
                self._add(topic)
                continue
            queues = []
            for queue_id in range(info.queues):
                queue = self._open_queue(info.name, queue_id)
                if repair and not any(is_segment_name(n) for n in _listdir(queue.directory)):
                    since = info.since(queue_id)
                    if rebuild_from is None or since < rebuild_from:
                        rebuild_from = since
                    fileio.make_dir(queue.directory, parents=True, exist_ok=True)
                queues.append(queue)
            self._add(self._files_topic(info, queues))
        return rebuild_from

    def reload(self, table: TopicTable) -> list[ConsumeQueue]:
        """Apply the changes another process made to ``topics.json``; return new queues.

        A queue whose incarnation changed (removed and added back since this process
        last looked) is opened anew: nothing cached for its predecessor is used again.
        """
        opened = []
        for name in list(self.topics):
            info = table.topics.get(name)
            if info is None or info.created_offset != self.topics[name].info.created_offset:
                self.close_topic(name)
        for info in table.topics.values():
            topic = self.topics.get(info.name)
            if topic is None and info.layout == LAYOUT_SHARED:
                self._add(self._shared_topic(info))
                continue
            if topic is None:
                queues = [self._open_queue(info.name, q) for q in range(info.queues)]
                self._add(self._files_topic(info, queues))
                opened.extend(queues)
                continue
            reborn = _reborn_queues(topic.info, info, len(topic.queues))
            if topic.blocks is not None:
                self._reload_shared(topic, info, reborn)
                continue
            for queue_id in reborn:
                topic.queues[queue_id].close()
                topic.queues[queue_id] = queue = self._open_queue(info.name, queue_id)
                opened.append(queue)
            for queue_id in range(len(topic.queues), info.queues):
                queue = self._open_queue(info.name, queue_id)
                topic.queues.append(queue)
                opened.append(queue)
            while len(topic.queues) > info.queues:
                topic.queues.pop().close()
            if reborn or info.queues != topic.info.queues:
                # The witness as last read may hold a removed queue's end.
                topic.ends = QueueEnds(self.root / info.name, info.created_offset)
            topic.info = info
        self.forget_closed()
        return opened

    def _reload_shared(self, topic: Topic, info: TopicInfo, reborn: list[int]) -> None:
        blocks = topic.blocks
        for queue_id in reborn:
            topic.queues.forget(queue_id)
            blocks.recheck_queue(queue_id)
        if len(topic.queues) < info.queues:
            topic.queues.grow(info.queues - len(topic.queues))
        while len(topic.queues) > info.queues:
            topic.queues.pop().close()
            blocks.recheck_queue(len(topic.queues))
        topic.info = info

    def create(self, info: TopicInfo) -> Topic:
        """Make the directories and first files of a new topic's queues."""
        directory = self.root / info.name
        fileio.remove_tree(directory)
        fileio.make_dir(directory, parents=True)
        if info.layout == LAYOUT_SHARED:
            topic = self._shared_topic(info)
            topic.blocks.create_first_file()
            fileio.fsync_dir(directory)
            fileio.fsync_dir(self.root)
            self._add(topic)
            return topic
        queues = []
        for queue_id in range(info.queues):
            queue = self._open_queue(info.name, queue_id)
            queue.create_first_file()
            queues.append(queue)
        fileio.fsync_dir(directory)
        fileio.fsync_dir(self.root)
        topic = self._files_topic(info, queues)
        self._add(topic)
        return topic

    def close_topic(self, name: str) -> list[ConsumeQueue]:
        topic = self.topics.pop(name)
        self._by_bytes.pop(topic.name_bytes, None)
        if self.by_id.get(topic.info.id) is topic:
            del self.by_id[topic.info.id]
        queues = topic.queue_objects()
        for queue in queues:
            queue.close()
        self.dirty.difference_update(queues)
        if topic.blocks is not None:
            topic.blocks.close()
        return queues

    def add_queues(self, topic: Topic, count: int) -> list[ConsumeQueue]:
        """Open (creating) ``count`` new queues at the end of ``topic``."""
        if topic.blocks is not None:
            topic.queues.grow(count)
            return []
        added = []
        for queue_id in range(len(topic.queues), len(topic.queues) + count):
            queue = self._open_queue(topic.info.name, queue_id)
            fileio.remove_tree(queue.directory)  # a removal cut short may have left it
            topic.queues.append(queue)
            added.append(queue)
            queue.create_first_file()
        fileio.fsync_dir(self.root / topic.info.name)
        return added

    def remove_added_queues(self, topic: Topic, keep: int) -> None:
        """Take back the queues past the first ``keep`` that ``add_queues`` made (their
        addition could not be saved)."""
        while len(topic.queues) > keep:
            queue = topic.queues.pop()
            queue.close()
            if topic.blocks is None:
                fileio.remove_tree(queue.directory)

    def remove_last_queue(self, topic: Topic) -> ConsumeQueue:
        """Close the last queue of ``topic`` and delete its files."""
        queue = topic.queues.pop()
        queue.close()
        self.dirty.discard(queue)
        if topic.blocks is not None:
            topic.blocks.forget_queue(len(topic.queues))
            return queue
        fileio.remove_tree(queue.directory)
        fileio.fsync_dir(self.root / topic.info.name)
        if topic.ends is not None:  # a queue added later under this id starts unwitnessed
            topic.ends.lower_to(len(topic.queues), 0, len(topic.queues))
        return queue

    def _open_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(
            self.root / topic / str(queue_id), self.entries_per_file, self.handles, self._on_load
        )
        queue.owner = (topic.encode(), queue_id)
        return queue

    def _files_topic(self, info: TopicInfo, queues: list[ConsumeQueue]) -> Topic:
        return Topic(info, queues, ends=QueueEnds(self.root / info.name, info.created_offset))

    def _shared_topic(self, info: TopicInfo) -> Topic:
        blocks = BlockStore(
            self.root / info.name / BLOCKS_DIR, info.block_entries, info.blocks_per_file
        )
        blocks.tail_source = self.tail_source
        topic = Topic(info, [], blocks)
        topic.queues = LazyQueues(
            info.queues, lambda queue_id: self._block_queue(topic, queue_id), blocks.index
        )
        return topic

    def _block_queue(self, topic: Topic, queue_id: int) -> BlockQueue:
        queue = BlockQueue(topic.blocks, queue_id, self._on_load)
        queue.owner = (topic.name_bytes, queue_id)
        return queue

    def _loaded(self, queue: ConsumeQueue) -> None:
        if self.on_load is not None:
            self.on_load(queue)

    def _add(self, topic: Topic) -> None:
        self.topics[topic.info.name] = topic
        self._by_bytes[topic.name_bytes] = topic
        self.by_id[topic.info.id] = topic

    def resolve(self, topic: bytes, queue_id: int) -> tuple[ConsumeQueue, int] | None:
        """The queue a record of ``topic``/``queue_id`` belongs to, and its topic's
        creation offset (older records belong to a deleted topic of the same name)."""
        state = self._by_bytes.get(topic)
        if state is None or queue_id >= len(state.queues):
            return None
        return state.queues[queue_id], state.info.since(queue_id)

    def topic_of(self, name: bytes) -> Topic | None:
        return self._by_bytes.get(name)

    def all_queues(self) -> list[ConsumeQueue]:
        return [q for topic in self.topics.values() for q in topic.queues]

    def loaded_queues(self) -> list[ConsumeQueue]:
        """The queues used so far (the others have nothing this process must look at)."""
        return [q for topic in self.topics.values() for q in topic.made_queues() if q.loaded]

    def shared_topics(self) -> list[Topic]:
        return [topic for topic in self.topics.values() if topic.blocks is not None]

    def take_dirty(self) -> list:
        """The queues written since the last call (a flush fsyncs their files)."""
        dirty = list(self.dirty)
        self.dirty.clear()
        return dirty

    def forget_closed(self) -> None:
        """Drop closed queues from ``dirty`` (after a reload closed some)."""
        self.dirty.difference_update([queue for queue in self.dirty if queue.closed])

    def close(self) -> None:
        for name in list(self.topics):
            self.close_topic(name)
        self.handles.close()


def _reborn_queues(old: TopicInfo, new: TopicInfo, count: int) -> list[int]:
    """The ids below ``count`` (and both queue counts) whose queue in ``new`` is another
    incarnation than in ``old``."""
    if old.queue_since == new.queue_since and old.queue_generation == new.queue_generation:
        return []  # the common case, without a look at every queue of a big topic
    return [
        queue_id
        for queue_id in range(min(count, old.queues, new.queues))
        if old.incarnation(queue_id) != new.incarnation(queue_id)
    ]


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
