"""A stream's events and an append's results as the API answers them (read models for
console/api/read_models/)."""

from __future__ import annotations

from dataclasses import dataclass

from storeadapter.engine import EventAppendResult, EventSlice, StoredEvent


@dataclass(frozen=True)
class StreamPage:
    """A page of a stream's events, what the store knows about the rest of the stream,
    and the ``from_version`` of the next page (None at the newest)."""

    topic: str
    stream_id: str
    stream_version: int
    first_kept_version: int
    deleted_by_retention: bool
    events: list[StoredEvent]
    next_from_version: int | None

    @classmethod
    def of(cls, topic: str, stream_id: str, events: EventSlice) -> StreamPage:
        following = events[-1].version + 1 if events else None
        if following is not None and following > events.stream_version:
            following = None
        return cls(
            topic=topic,
            stream_id=stream_id,
            stream_version=events.stream_version,
            first_kept_version=events.first_kept_version,
            deleted_by_retention=events.deleted_by_retention,
            events=list(events),
            next_from_version=following,
        )


@dataclass(frozen=True)
class EventsAppended:
    """Where an append's events landed, and the stream's version after it."""

    stream_version: int
    results: list[EventAppendResult]

    @classmethod
    def of(cls, results: list[EventAppendResult]) -> EventsAppended:
        return cls(stream_version=results[-1].version, results=list(results))
