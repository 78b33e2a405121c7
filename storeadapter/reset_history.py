"""Which of a group's offset changes an operator's reset made, from the engine's offset
history: the commits of ``storeadapter.offset_reset.apply_reset`` carry the reason
``reset:<id>:<mode>`` (``reset_reason``), a consumer's commits never do.

The monitoring reads them so that a move made by a reset (a skip, a rewind, an undo) is
neither counted as consumption nor judged as the consumer's own commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from storeadapter.engine import MessageStore
from storeadapter.offset_reset import REASON_PREFIX

#: The most offset changes read back per group (the engine keeps 1,000 per group).
HISTORY_READ = 1000


@dataclass(frozen=True)
class ResetMove:
    """One queue moved by a reset: from ``old`` (None: never committed) to ``new``."""

    reset_id: int | None
    mode: str
    topic: str
    queue: int
    old: int | None
    new: int
    time_ms: int

    @property
    def rewound(self) -> bool:
        """Whether the reset moved the offset backwards (messages consumed again)."""
        return self.old is not None and self.new < self.old

    def shift(self, position: int) -> int:
        """How far the reset moved the group's position (``position``: where it stood
        when never committed)."""
        return self.new - (position if self.old is None else self.old)


def _parse(reason: str) -> tuple[int | None, str] | None:
    if not reason.startswith(REASON_PREFIX):
        return None
    name, _, mode = reason[len(REASON_PREFIX) :].rpartition(":")
    return (int(name) if name.isdigit() else None), mode


def reset_moves(
    store: MessageStore, group: str, after_ms: int, until_ms: int | None = None
) -> dict[tuple[str, int], list[ResetMove]]:
    """The group's queues moved by resets after ``after_ms`` (and at or before
    ``until_ms``), each queue's moves oldest first."""
    moves: dict[tuple[str, int], list[ResetMove]] = {}
    for change in store.offset_history(group, limit=HISTORY_READ):  # newest first
        if change.time_ms <= after_ms:
            break
        if until_ms is not None and change.time_ms > until_ms:
            continue
        parsed = _parse(change.reason)
        if parsed is None:
            continue
        reset_id, mode = parsed
        moves.setdefault((change.topic, change.queue), []).insert(
            0,
            ResetMove(
                reset_id, mode, change.topic, change.queue, change.old, change.new, change.time_ms
            ),
        )
    return moves
