"""A store that joins an open one reads the last recovery from recovery.json; fields a
newer engine added are left out, the ones it knows are kept (not an empty report)."""

from __future__ import annotations

import json


def test_a_report_with_a_field_this_engine_does_not_know_keeps_the_known_ones(
    open_store, store_path
):
    first = open_store()
    path = store_path / "recovery.json"
    data = json.loads(path.read_bytes())
    data.update(records=123, scanned_bytes=4567, written_by_a_newer_engine=1)
    path.write_text(json.dumps(data))

    report = open_store().stats().last_recovery

    assert (report.records, report.scanned_bytes) == (123, 4567)
    assert report.clean_shutdown == first.stats().last_recovery.clean_shutdown
