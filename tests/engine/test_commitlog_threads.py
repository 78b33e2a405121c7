"""The commit log's segment table read by one thread while another rolls and retires
segments (a console request beside the store's upkeep): locate() sees one table, never a
list of bases out of step with the list of segments."""

from __future__ import annotations

import sys
import threading

import pytest

from storeadapter.engine.commitlog import CommitLog

# Not run again in the shared-layout pass: the commit log alone, no topic.
pytestmark = pytest.mark.one_layout

SEGMENT = 4096


def test_locating_beside_a_thread_that_rolls_and_retires_segments_never_misses(tmp_path):
    log = CommitLog(tmp_path / "commitlog", SEGMENT)
    log.open()
    segment = log.writable_segment()
    for _ in range(8):
        segment = log.close_segment(segment, 0)
    done = threading.Event()
    failures: list[BaseException] = []

    def churn() -> None:
        nonlocal segment
        try:
            for _ in range(400):
                segment = log.close_segment(segment, 0)
                log.drop_below(log.segments[1].base)
        finally:
            done.set()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads between almost every bytecode
    try:
        writer = threading.Thread(target=churn)
        writer.start()
        while not done.is_set():
            for located in range(log.segments[0].base, log.segments[-1].end, SEGMENT // 2):
                try:
                    found = log.locate(located)
                except Exception as error:  # noqa: BLE001 - collected for the assertion
                    failures.append(error)
                    continue
                if found is not None:
                    holder, position = found
                    assert holder.base <= located < holder.end and position >= 0
        writer.join()
    finally:
        sys.setswitchinterval(switch)
        log.close()

    assert failures == []
