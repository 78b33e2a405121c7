"""How far behind a consumer group is in one queue: the one rule the pages, the API, the
CLI, the sampler and so the alerts share.

Lag counts from the committed offset (Kafka, Burrow): messages retention deleted before
the group consumed them are still behind, and counted as lost to retention; the lag does
not drop when retention takes them. A queue the group never committed on counts from
its first offset (where a new consumer starts: the engine's ``group_position``).
"""

from __future__ import annotations

from storeadapter.engine import group_position


def lag_and_lost(committed: int | None, low: int, high: int) -> tuple[int, int]:
    """How many messages behind a queue holding offsets ``low`` to ``high - 1`` is, and how
    many of them retention deleted before the group consumed them: the rule, once."""
    position = group_position(committed, low)
    lag, lost = high - position, low - position
    # Comparisons, not max(0, …): this runs once per group and queue on the dashboard and
    # the groups page, where a builtin call each costs more than the rest of the rule.
    return (lag if lag > 0 else 0), (lost if lost > 0 else 0)


def queue_lag(committed: int | None, low: int, high: int) -> int:
    """Messages behind in a queue holding offsets ``low`` to ``high - 1``."""
    return lag_and_lost(committed, low, high)[0]


def lost_to_retention(committed: int | None, low: int) -> int:
    """Messages retention deleted before the group consumed them."""
    return lag_and_lost(committed, low, low)[1]
