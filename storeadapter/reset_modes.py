"""The offset reset modes, in one table: what each takes, where it puts each queue, and
how each door of the console asks for it.

A ``ResetMode`` knows its target computation (``targets``: checks the value a request
gave and says where each queue goes), the REST API's request field for its value
(``api_field``), the console form's (``form_field``) and the ``tidemark reset-offsets``
flag that chooses it (``cli_flag``). ``storeadapter.offset_reset.preview_reset`` plans
with the targets; the console's reset form, the API's request bodies and schema and the
command line's flags are built from ``RESET_MODES``. A mode is *absolute* when its
targets are fixed by the preview (applied as previewed even if the group's consumers
committed since) and *relative* when they follow the offsets at the moment of applying
(a shift).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from storeadapter.engine import MessageStore, StoreError

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


class ResetError(StoreError):
    """A reset cannot be previewed or applied; the sentence says why."""


#: Where a mode puts one queue: ``(queue, low, high, current)`` (the queue holds offsets
#: ``low`` to ``high - 1``; the group stands at ``current``) → the wanted offset (clamped
#: into the range afterwards), or None to leave the queue where it is.
QueueTarget = Callable[[int, int, int, int], "int | None"]


@dataclass(frozen=True)
class Targets:
    """A mode's targets in one preview: where each queue goes, and the value the plan
    keeps (what the request asked, in the plan's terms)."""

    at: QueueTarget
    value: int | str | dict[str, int] | None


#: ``(store, group, topic, value)`` → the mode's ``Targets``; ResetError for a value the
#: mode cannot take.
TargetsOf = Callable[[MessageStore, str, str, Any], Targets]


@dataclass(frozen=True)
class ResetMode:
    name: str
    #: The console form's choice.
    label: str
    #: One sentence for the API's schema and docs.
    description: str
    takes: Takes
    targets: TargetsOf
    #: The REST API request's field holding the value (None: the mode takes none).
    api_field: str | None
    #: The console reset form's field holding the value (None: the mode takes none).
    form_field: str | None
    #: The ``tidemark reset-offsets`` flag choosing the mode; a switch when the mode
    #: takes no value, else the flag takes the value, shown as ``cli_metavar``.
    cli_flag: str
    cli_metavar: str | None = None
    cli_help: str | None = None
    relative: bool = False
    #: Whether the plan counts the queues whose target is at or past their end (a time
    #: after the newest message: there the same as latest).
    counts_past_newest: bool = False


def _earliest(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    return Targets(lambda queue, low, high, current: low, value)


def _latest(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    return Targets(lambda queue, low, high, current: high, value)


def _to_offsets(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    """The queues named to their offsets; the others left where they are."""
    named = _queue_offsets(store, topic, value)
    return Targets(
        lambda queue, low, high, current: named.get(queue),
        {str(q): o for q, o in named.items()},
    )


def _to_time(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    at_ms = _whole_number("time", value)
    return Targets(
        lambda queue, low, high, current: store.offset_for_time(topic, queue, at_ms), at_ms
    )


def _shifted(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    shift = _whole_number("shift", value)
    return Targets(lambda queue, low, high, current: current + shift, shift)


def _from_group(store: MessageStore, group: str, topic: str, value: Any) -> Targets:
    """The queues another group committed on to its offsets; the others left."""
    named = _group_offsets(store, group, topic, value)
    return Targets(lambda queue, low, high, current: named.get(queue), value)


RESET_MODES: tuple[ResetMode, ...] = (
    ResetMode(
        "earliest",
        "Earliest: consume everything still stored again",
        "Every queue to its first stored offset.",
        "nothing",
        _earliest,
        api_field=None,
        form_field=None,
        cli_flag="--to-earliest",
    ),
    ResetMode(
        "latest",
        "Latest: skip the backlog",
        "Every queue to its end (where the next message will go).",
        "nothing",
        _latest,
        api_field=None,
        form_field=None,
        cli_flag="--to-latest",
    ),
    ResetMode(
        "offset",
        "An offset per queue",
        "The queues named to the offsets given; the other queues stay.",
        "offsets",
        _to_offsets,
        api_field="offsets",
        form_field="offsets",
        cli_flag="--to-offsets",
        cli_metavar="Q=O,...",
        cli_help="queue=offset pairs",
    ),
    ResetMode(
        "time",
        "A point in time (UTC)",
        "Every queue to its first message stored at that time or later (a time after "
        "the newest message is the same as latest).",
        "time",
        _to_time,
        api_field="value",
        form_field="when",
        cli_flag="--to-datetime",
        cli_metavar="ISO8601",
        cli_help="UTC unless a zone is given",
        counts_past_newest=True,
    ),
    ResetMode(
        "shift",
        "Shift by ±N messages",
        "Every queue by N messages from where the group is when the reset is applied "
        "(negative: consume again; positive: skip).",
        "shift",
        _shifted,
        api_field="value",
        form_field="shift",
        cli_flag="--shift-by",
        cli_metavar="N",
        relative=True,
    ),
    ResetMode(
        "group",
        "The offsets of another group",
        "Every queue to the offset another group committed there; queues it never "
        "committed on stay.",
        "group",
        _from_group,
        api_field="source",
        form_field="source",
        cli_flag="--from-group",
        cli_metavar="GROUP",
        cli_help="take another group's offsets",
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


def mode_named(mode: str) -> ResetMode:
    """The mode of that name; ResetError for a name no mode has."""
    known = MODES_BY_NAME.get(mode) if isinstance(mode, str) else None
    if known is None:
        raise ResetError(f"a reset mode is one of {', '.join(MODE_NAMES)}, not {mode!r}")
    return known


def _whole_number(mode: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResetError(f"a {mode} reset needs a whole number, not {value!r}")
    return value


def _queue_offsets(store: MessageStore, topic: str, value: object) -> dict[int, int]:
    if not isinstance(value, dict) or not value:
        raise ResetError("an offset reset needs an offset for at least one queue")
    queues = store.topic(topic).queues
    offsets = {}
    for queue, offset in value.items():
        try:
            queue_id = int(queue)
        except (TypeError, ValueError):
            raise ResetError(f"{queue!r} is not a queue id") from None
        if not 0 <= queue_id < queues:
            raise ResetError(f"topic {topic!r} has queues 0 to {queues - 1}; not {queue_id}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise ResetError(f"the offset for queue {queue_id} must be a whole number")
        offsets[queue_id] = offset
    return offsets


def _group_offsets(store: MessageStore, group: str, topic: str, source: object) -> dict[int, int]:
    """The offsets group ``source`` committed on ``topic``, by queue."""
    if not isinstance(source, str) or not source:
        raise ResetError("a reset to another group's offsets needs that group's name")
    if source == group:
        raise ResetError("a group's offsets cannot be copied onto the same group")
    store.topic(topic)  # TopicNotFoundError before the group's offsets are read
    offsets = {
        queue: offset for (_t, queue), offset in store.committed_offsets(source, topic).items()
    }
    if not offsets:
        raise ResetError(f"group {source!r} has no committed offsets on {topic!r} to copy")
    return offsets
