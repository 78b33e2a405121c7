"""The checkpoint: both slots, and what the newest valid one claims of the log."""

from __future__ import annotations

from pathlib import Path

from ..checkpoint import SLOT_SIZE, CheckpointState, checkpoint_problems, parse_checkpoint
from .problems import Findings

KIND = "checkpoint"
FILE_NAME = "checkpoint"


def read_state(store: Path) -> CheckpointState:
    """The newest valid slot (all zeros without one: then nothing is known durable, and
    recovery scans, and rewrites entries from, the whole log)."""
    try:
        state = parse_checkpoint((store / FILE_NAME).read_bytes()[: 2 * SLOT_SIZE])
    except FileNotFoundError:
        state = None
    return state if state is not None else CheckpointState(0, 0, 0, 0, 0)


def check_checkpoint(store: Path, log_end: int, log_records: int = 0) -> Findings:
    """Check both slots of ``store``'s checkpoint, and that no slot claims offsets past
    ``log_end``. A log that ends below the newest slot's ``commitlog_flushed`` lost
    durable records: the commit-log check reports that, once, and the slots' claims past
    the end are not reported again here."""
    findings = Findings(KIND)
    try:
        data = (store / FILE_NAME).read_bytes()
    except FileNotFoundError:
        if log_records:
            findings.note(FILE_NAME, "missing: the next open scans the whole log")
        return findings
    findings.counts["slots"] = 2
    problems = checkpoint_problems(data)
    # checkpoint_problems ends with what recovery did about the damage; keep it with it.
    if problems:
        findings.damage(FILE_NAME, "; ".join(problems))
    newest = parse_checkpoint(data[: 2 * SLOT_SIZE])
    if newest is None or newest.commitlog_flushed > log_end:
        return findings
    for slot in range(2):
        state = parse_checkpoint(_slot_alone(data, slot))
        if state is None:
            continue
        for field, value in _offsets_past(state, log_end):
            findings.damage(
                FILE_NAME,
                f"slot {slot} (sequence {state.sequence}) says {field} is {value}, past the "
                f"log's end ({log_end})",
            )
    return findings


def _slot_alone(data: bytes, slot: int) -> bytes:
    raw = data[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE]
    empty = bytes(SLOT_SIZE)
    return raw + empty if slot == 0 else empty + raw


def _offsets_past(state: CheckpointState, log_end: int) -> list[tuple[str, int]]:
    """The slot's fields that claim more of the log than there is."""
    fields = (
        ("commitlog_flushed", state.commitlog_flushed),
        ("dispatched", state.dispatched),
        ("index_dispatched", state.index_dispatched),
    )
    return [(name, value) for name, value in fields if value > log_end]
