"""The ``filter`` option (issue 34, item 1): a filter expression pushed down to the data
source and evaluated on the executors by the engine's crate, one native call a batch of
records; a bad expression fails the read on the driver with its position."""

from __future__ import annotations

import json

import pytest

from storeadapter.engine.filters import FilterSyntaxError
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.spark.sparktools import tidemark


@pytest.fixture
def orders(open_store, store_path):
    store = open_store()
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            {
                "body": json.dumps({"order": {"total": i * 10}}).encode(),
                "tag": "paid" if i % 2 else "open",
                "queue": i % 2,
            }
            for i in range(40)
        ],
    )
    return store


def _totals(rows) -> list[int]:
    return sorted(json.loads(bytes(r["body"]))["order"]["total"] for r in rows)


def _reader_rows(store_path, **options) -> list[dict]:
    reader = TidemarkDataSource({"path": str(store_path), **options}).reader(SCHEMA)
    rows = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            rows.extend(batch.to_pylist())
    return rows


def test_the_reader_keeps_only_what_the_expression_matches(orders, store_path):
    rows = _reader_rows(store_path, filter='body.order.total > 300 && tag == "paid"')

    assert _totals(rows) == [310, 330, 350, 370, 390]


def test_an_expression_that_does_not_compile_fails_the_read_with_its_position(store_path, orders):
    with pytest.raises(FilterSyntaxError) as caught:
        TidemarkDataSource({"path": str(store_path), "filter": "tag =="}).reader(SCHEMA)

    assert caught.value.position >= 5


def test_spark_reads_with_the_filter_option(spark, orders, store_path):
    df = tidemark(spark, store_path, filter="body.order.total < 50 && queue == 0")

    assert _totals(df.collect()) == [0, 20, 40]
