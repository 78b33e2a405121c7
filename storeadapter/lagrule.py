"""How far behind a consumer group is in one queue: the one rule the pages, the API, the
CLI, the sampler and so the alerts share.

Lag counts from the committed offset (Kafka, Burrow): messages retention deleted before
the group consumed them are still behind, and counted as lost to retention; the lag does
not drop when retention takes them. A queue the group never committed on counts from
its first offset (where a new consumer starts: the engine's ``group_position``).
"""

from __future__ import annotations

from storeadapter.engine import group_position


def queue_lag(committed: int | None, low: int, high: int) -> int:
    """Messages behind in a queue holding offsets ``low`` to ``high - 1``."""
    return max(0, high - group_position(committed, low))


def lost_to_retention(committed: int | None, low: int) -> int:
    """Messages retention deleted before the group consumed them."""
    return max(0, low - group_position(committed, low))


def lag_and_lost(committed: int | None, low: int, high: int) -> tuple[int, int]:
    """``queue_lag`` and ``lost_to_retention`` of one queue together: the position looked
    up once (a list of a thousand queues calls this once a queue, not four functions)."""
    position = group_position(committed, low)
    return max(0, high - position), max(0, low - position)
