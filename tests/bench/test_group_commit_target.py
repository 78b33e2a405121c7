"""Issue 31's 8-thread sync target divides by the bare fdatasync's own time, not by the
bare loop's rate, which on a busy machine is the run queue's (bench/compare.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import compare  # noqa: E402


def _ratio_row(machine: dict) -> dict:
    rows: list = []
    figures = {"append_single_sync_8_threads": {"msgs_per_s": 16_000, "msgs_per_fdatasync": 7}}
    compare._group_commit_checks(rows, "50", figures, machine)
    return next(row for row in rows if "x (8 x fdatasync/s)" in row["target"])


def test_the_ratio_is_taken_from_the_bare_calls_own_time_less_their_run_queue_wait():
    # A loop starved of CPU (500/s) would make 16,000 msgs/s look like 4 x 8 x bare.
    bare = {"per_s": 500, "sync_us_mean": 2000.0, "sync_less_rq_us_mean": 200.0}

    row = _ratio_row({"fdatasync_prealloc": bare})

    assert row["value"] == 0.4  # 16,000 / (8 x 5,000)
    assert not row["met"]
    assert "own time" in row["figure"]


def test_the_loop_rate_is_used_where_the_kernel_keeps_no_run_queue_wait():
    row = _ratio_row({"fdatasync_prealloc": {"per_s": 2_000, "sync_us_mean": 500.0}})

    assert row["value"] == 1.0
    assert "loop's rate" in row["figure"]
