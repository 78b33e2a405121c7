"""The offset reset modes, in one table.

The console's reset form (its choices and which field each mode needs), the API's
validation of a reset request and the API's schema are all built from ``RESET_MODES``;
``storeadapter.offset_reset`` plans each mode. A mode is *absolute* when its targets are
fixed by the preview (applied as previewed even if the group's consumers committed
since) and *relative* when they follow the offsets at the moment of applying (a shift).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: What a mode's request carries besides the topic: nothing, offsets per queue, a time,
#: a shift, or another group's name.
Takes = Literal["nothing", "offsets", "time", "shift", "group"]

#: A shift moves at most this many messages either way.
MAX_SHIFT = 10**12
#: The latest time a time reset takes: 9999-12-31T23:59:59.999Z.
MAX_TIME_MS = 253_402_300_799_999
#: The largest offset a reset to given offsets takes.
MAX_OFFSET = 2**63 - 1
#: The most queues a reset to given offsets names at once.
MAX_NAMED_QUEUES = 1024


@dataclass(frozen=True)
class ResetMode:
    name: str
    #: The console form's choice.
    label: str
    #: One sentence for the API's schema and docs.
    description: str
    takes: Takes
    relative: bool = False


RESET_MODES: tuple[ResetMode, ...] = (
    ResetMode(
        "earliest",
        "Earliest: consume everything still stored again",
        "Every queue to its first stored offset.",
        "nothing",
    ),
    ResetMode(
        "latest",
        "Latest: skip the backlog",
        "Every queue to its end (where the next message will go).",
        "nothing",
    ),
    ResetMode(
        "offset",
        "An offset per queue",
        "The queues named to the offsets given; the other queues stay.",
        "offsets",
    ),
    ResetMode(
        "time",
        "A point in time (UTC)",
        "Every queue to its first message stored at that time or later (a time after "
        "the newest message is the same as latest).",
        "time",
    ),
    ResetMode(
        "shift",
        "Shift by ±N messages",
        "Every queue by N messages from where the group is when the reset is applied "
        "(negative: consume again; positive: skip).",
        "shift",
        relative=True,
    ),
    ResetMode(
        "group",
        "The offsets of another group",
        "Every queue to the offset another group committed there; queues it never "
        "committed on stay.",
        "group",
    ),
)
MODES_BY_NAME = {mode.name: mode for mode in RESET_MODES}
MODE_NAMES = tuple(MODES_BY_NAME)
#: A plan's mode when it undoes an applied reset (not a mode a request names).
UNDO = "undo"


def is_relative(mode: str) -> bool:
    """Whether a plan of ``mode`` is applied relative to the offsets at apply time."""
    known = MODES_BY_NAME.get(mode)
    return known is not None and known.relative
