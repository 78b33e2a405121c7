"""console.messages.exports.filter_export (issue 34, item 5): the messages a filter
expression matches as JSON Lines, a chunk of matches at a time, within the budget; its
trailer's cursor continues it without loss or repeats."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from console.messages import exports
from storeadapter.engine import Message, QueueNotFoundError, TopicNotFoundError, filters

PAID = 'tag == "paid"'


@pytest.fixture
def orders(store):
    """Topic orders: 2 queues, 20 orders (id i in queue i % 2); every third one paid."""
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            Message(json.dumps({"id": i}), tag="paid" if i % 3 == 0 else "open", queue=i % 2)
            for i in range(20)
        ],
    )
    return store


def run(store, expression=PAID, *, queues=None, cursor=None, budget=None):
    """(the exported ids, the trailer, what the budget was told was sent)."""
    sent = []
    budget = budget or exports.Budget()
    budget = exports.Budget(budget.records, budget.seconds, sent.append)
    then = exports.Continuation("/x/", {"expression": expression})
    lines = [
        json.loads(line)
        for line in exports.filter_export(store, "orders", expression, queues, cursor, budget, then)
    ]
    assert "export" in lines[-1] and all("message_id" in line for line in lines[:-1])
    return [json.loads(m["body"])["id"] for m in lines[:-1]], lines[-1]["export"], sent


def test_a_filter_export_holds_every_match_by_queue_and_offset(orders):
    found, trailer, sent = run(orders)

    assert found == [0, 6, 12, 18, 3, 9, 15]
    assert trailer == {
        "complete": True,
        "messages": 7,
        "stopped_by": None,
        "next": None,
        "continue": None,
    }
    assert sent == [7]


def test_a_filter_export_of_some_queues_reads_only_those(orders):
    found, trailer, _ = run(orders, queues=[1])

    assert found == [3, 9, 15] and trailer["complete"] is True


def test_matches_past_the_chunk_are_all_exported(orders, monkeypatch):
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)

    found, trailer, _ = run(orders)

    assert found == [0, 6, 12, 18, 3, 9, 15] and trailer["complete"] is True


def test_a_filter_export_stopped_by_records_continues_without_loss_or_repeats(orders):
    found, trailer, _ = run(orders, budget=exports.Budget(records=3))
    assert (trailer["complete"], trailer["stopped_by"], trailer["messages"]) == (
        False,
        "records",
        3,
    )
    cursor = trailer["next"]["cursor"]
    assert trailer["continue"] == "/x/?" + urlencode({"expression": PAID, "cursor": cursor})
    everything = list(found)
    while not trailer["complete"]:
        found, trailer, _ = run(
            orders, cursor=trailer["next"]["cursor"], budget=exports.Budget(records=3)
        )
        everything += found

    assert everything == [0, 6, 12, 18, 3, 9, 15]


def test_a_filter_export_out_of_time_says_where_to_go_on(orders, monkeypatch):
    ticks = iter(range(0, 10_000, 2))
    monkeypatch.setattr(exports.time, "monotonic", lambda: next(ticks))
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 1)

    found, trailer, _ = run(orders, budget=exports.Budget(seconds=5))

    assert (trailer["complete"], trailer["stopped_by"]) == (False, "seconds")
    everything = list(found)
    while not trailer["complete"]:
        found, trailer, _ = run(orders, cursor=trailer["next"]["cursor"])
        everything += found
    assert everything == [0, 6, 12, 18, 3, 9, 15]


def test_a_rare_match_is_scanned_with_the_remaining_seconds(orders, monkeypatch):
    asked = []
    scan = filters.scan

    def recording(*args, **kwargs):
        asked.append((kwargs["max_seconds"], kwargs["max_records"]))
        return scan(*args, **kwargs)

    monkeypatch.setattr(filters, "scan", recording)

    run(orders, 'tag == "none"', budget=exports.Budget(seconds=7))

    assert len(asked) == 1
    assert 0 < asked[0][0] <= 7 and asked[0][1] == exports.FILTER_SCAN_RECORDS


def test_a_bad_expression_is_refused_before_any_line(orders):
    with pytest.raises(filters.FilterSyntaxError) as raised:
        exports.filter_export(orders, "orders", "tag ==", None, None, exports.Budget(), None)

    assert raised.value.position >= 0


def test_a_missing_topic_or_queue_is_refused_before_any_line(orders):
    with pytest.raises(TopicNotFoundError):
        exports.filter_export(orders, "nope", PAID, None, None, exports.Budget(), None)
    with pytest.raises(QueueNotFoundError):
        exports.filter_export(orders, "orders", PAID, [7], None, exports.Budget(), None)
