"""A damaged record is reported (a ``corrupt`` row) and the rest of the log is read."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from storeadapter.engine.verify import verify_commitlog
from storeadapter.spark import logview, planning, scanning
from tests.engine.storetools import (
    SEGMENT_BYTES,
    flip_bit,
    record_length,
    segment_paths,
    write_log_bytes,
)
from tests.spark.sparktools import engine_rows, spark_rows, tidemark


def _populate(store):
    store.create_topic("t", queues=2)
    return [store.append("t", f"record {i} ".encode() * 20, queue=i % 2) for i in range(40)]


@pytest.mark.parametrize(
    ("where", "reason"),
    [(70, "CRC32C mismatch"), (0, "length field")],
    ids=["body", "length"],
)
def test_a_corrupt_record_is_reported_and_the_rest_is_read(
    spark, open_store, store_path, where, reason
):
    store = open_store()
    results = _populate(store)
    victim = results[6]
    length = record_length(store_path, victim.commit_offset)
    assert victim.commit_offset + length < SEGMENT_BYTES  # in the first, sealed segment
    flip_bit(store_path, victim.commit_offset + where, bit=2)

    rows = spark_rows(tidemark(spark, store_path))
    messages = [r for r in rows if r["corrupt"] is None]
    damage = [r for r in rows if r["corrupt"] is not None]
    expected = engine_rows(store)  # the engine's reads skip the damaged record too
    assert len(expected) == len(results) - 1
    assert messages == expected
    assert len(damage) == 1
    assert damage[0]["commit_offset"] == victim.commit_offset
    assert damage[0]["corrupt"]["length"] == length  # up to the next intact record
    assert reason in damage[0]["corrupt"]["reason"]
    assert {k for k, v in damage[0].items() if v is not None} == {"commit_offset", "corrupt"}

    only_messages = tidemark(spark, store_path).where(F.col("corrupt").isNull())
    assert only_messages.count() == len(expected)


def test_damage_is_reported_once_as_the_engine_verify_reports_it(open_store, store_path):
    """Several bad stretches, with the log cut into small ranges: each stretch is reported
    once, exactly as ``verify`` reports it, and every intact message is read."""
    store = open_store()
    results = _populate(store)
    store.close()
    assert len(segment_paths(store_path)) >= 3
    flip_bit(store_path, results[3].commit_offset + 80)  # a body bit
    write_log_bytes(store_path, results[10].commit_offset, bytes(300))  # zeros across records
    flip_bit(store_path, results[25].commit_offset + 4)  # the magic
    expected = verify_commitlog(store_path / "commitlog", SEGMENT_BYTES).corruptions
    assert len(expected) == 3

    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    for split in (1 << 20, 700, 300):
        scanning.counters.reset()
        found = []
        for log_range in planning.plan_ranges(snap, wanted, split_bytes=split):
            found.extend(scanning.read_range(log_range, wanted, snap.id_prefix))
        corruptions = [item for item in found if not hasattr(item, "message_id")]
        messages = [item for item in found if hasattr(item, "message_id")]
        assert corruptions == expected, split
        assert scanning.counters.corrupt == 3
        lost = [
            r
            for r in results
            if any(
                c.commit_offset <= r.commit_offset < c.commit_offset + c.length for c in corruptions
            )
        ]
        assert results[3] in lost and results[25] in lost
        assert [m.message_id for m in messages] == [r.message_id for r in results if r not in lost]
