"""The bounded cache of hot streams: each one's newest version, where its newest entry
is in the event index, its queue, and the entries its next append's jump can point at.

Least recently used streams go first once ``capacity`` streams are held, so its memory
is bounded by the setting (``stream_cache_streams``), not by the number of streams. Only
writers use it, under the store's write lock; each writer first drops what other
processes changed since it last looked (``EventIndex`` catch-up).
"""

from __future__ import annotations

from collections import OrderedDict


class StreamHead:
    """What a writer needs of a stream to append to it.

    ``stream_id`` is None for a head preloaded from the index alone (its record not read
    yet); ``queue`` is -1 when not known; ``chain`` is the (version, entry number) of the
    newest entry and of each entry its jumps lead to, or None until needed.
    """

    __slots__ = ("stream_id", "version", "entry", "commit_offset", "queue", "chain")

    def __init__(
        self,
        stream_id: str | None,
        version: int,
        entry: int,
        commit_offset: int,
        queue: int,
        chain: list[tuple[int, int]] | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.version = version
        self.entry = entry
        self.commit_offset = commit_offset
        self.queue = queue
        self.chain = chain

    def __repr__(self) -> str:
        return f"StreamHead({self.stream_id!r}, v{self.version}, entry {self.entry})"


class StreamCache:
    """(topic, stream hash) → StreamHead, least recently used first out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._heads: OrderedDict[tuple[str, int], StreamHead] = OrderedDict()

    def __len__(self) -> int:
        return len(self._heads)

    def get(self, topic: str, hashed: int) -> StreamHead | None:
        key = (topic, hashed)
        head = self._heads.get(key)
        if head is not None:
            self._heads.move_to_end(key)
        return head

    def put(self, topic: str, hashed: int, head: StreamHead) -> None:
        key = (topic, hashed)
        heads = self._heads
        heads[key] = head
        heads.move_to_end(key)
        while len(heads) > self.capacity:
            heads.popitem(last=False)

    def seed(self, topic: str, hashed: int, head: StreamHead) -> bool:
        """Add a head unless the stream is cached or the cache is full (a preload)."""
        key = (topic, hashed)
        if key in self._heads or len(self._heads) >= self.capacity:
            return False
        self._heads[key] = head
        self._heads.move_to_end(key, last=False)  # preloaded newest first: keep that order
        return True

    def drop(self, topic: str, hashed: int) -> None:
        self._heads.pop((topic, hashed), None)

    def drop_topic(self, topic: str) -> None:
        for key in [key for key in self._heads if key[0] == topic]:
            del self._heads[key]

    def clear(self) -> None:
        self._heads.clear()


__all__ = ["StreamCache", "StreamHead"]
