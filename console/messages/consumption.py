"""Was a message consumed by each group? (issue 34, item 3): storeadapter.message_track for
the groups the user may view, shared by the message page and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.accounts.permissions import GROUP, permissions_of
from console.core.store import get_store
from storeadapter import message_track
from storeadapter.message_track import GroupTrack

#: What the page says of each state.
STATE_TEXT = {
    message_track.CONSUMED: "consumed",
    message_track.NOT_YET: "not yet",
    message_track.LOST: "lost to retention",
    message_track.DEAD_LETTERED: "dead-lettered",
}


def consumption_rows(user: Any, message: Any) -> list[dict[str, Any]]:
    """``group_consumption`` for the message page: each group's track with the words for its
    state and for each copy's."""
    return [
        {
            "track": track,
            "said": STATE_TEXT[track.state],
            "copies": [(copy, STATE_TEXT[copy.state]) for copy in track.copies],
        }
        for track in group_consumption(user, message)
    ]


def group_consumption(user: Any, message: Any) -> list[GroupTrack]:
    """Each group consuming the message's topic that ``user`` may view, by name, with its
    state for the message and its retry and DLQ copies of it."""
    store = get_store()
    groups = message_track.consuming_groups(store, message.topic)
    return message_track.track(store, message, permissions_of(user).filter(GROUP, groups))


@dataclass(frozen=True)
class Consumption:
    """A message's place and, for each group consuming its topic (that the user may
    view), whether it consumed it (``group_consumption``)."""

    message_id: str
    topic: str
    queue: int
    queue_offset: int
    groups: list[GroupTrack]

    @classmethod
    def of(cls, user: Any, message: Any) -> Consumption:
        return cls(
            message_id=message.message_id,
            topic=message.topic,
            queue=message.queue,
            queue_offset=message.queue_offset,
            groups=group_consumption(user, message),
        )
