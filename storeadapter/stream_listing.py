"""The streams of a stream topic and their versions, found by reading the topic's queues.

The event index is keyed by hashes, so the stream ids are read from the events
themselves (their ``STREAM_ID`` property). At most ``SCAN_LIMIT`` events are read per
listing, each queue from its oldest kept event; the listing says when it stopped short.
The versions of the rows shown are asked of the engine (``stream_version``): current.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storeadapter.engine import STREAM_PROPERTY, MessageStore

#: Events read at most for one listing.
SCAN_LIMIT = 200_000
#: Events asked of the engine per read.
READ_BATCH = 5_000


@dataclass(frozen=True, slots=True)
class StreamRow:
    stream_id: str
    version: int
    queue: int


@dataclass
class StreamListing:
    """Stream ids matching a search, sorted; ``partial``: the scan stopped at SCAN_LIMIT."""

    ids: list[tuple[str, int]] = field(default_factory=list)  # (stream id, queue)
    scanned: int = 0
    partial: bool = False


def find_streams(store: MessageStore, topic: str, query: str = "") -> StreamListing:
    """The ids of the topic's streams containing ``query`` (case-insensitive), sorted."""
    info = store.topic(topic)
    wanted = query.casefold()
    found: dict[str, int] = {}
    listing = StreamListing()
    for queue in range(info.queues):
        low, high = store.queue_range(topic, queue)
        offset = low
        while offset < high:
            if listing.scanned >= SCAN_LIMIT:
                listing.partial = True
                break
            count = min(READ_BATCH, high - offset, SCAN_LIMIT - listing.scanned)
            result = store.read_result(topic, queue, offset, count)
            if not result.messages:
                break
            listing.scanned += len(result.messages)
            for message in result.messages:
                stream_id = message.properties.get(STREAM_PROPERTY)
                if stream_id is not None and wanted in stream_id.casefold():
                    found.setdefault(stream_id, queue)
            offset = max(result.next_offset, offset + 1)
    listing.ids = sorted(found.items())
    return listing


def stream_rows(store: MessageStore, topic: str, ids: list[tuple[str, int]]) -> list[StreamRow]:
    """The rows of the streams ``ids`` (one page), each with its current version."""
    return [
        StreamRow(stream_id, store.stream_version(topic, stream_id), queue)
        for stream_id, queue in ids
    ]
