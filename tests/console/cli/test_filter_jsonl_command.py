"""``tidemark filter TOPIC EXPRESSION --jsonl`` (issue 34, item 5): the filter's results as
JSON Lines, the lines of the API's filter export (one owner: console.messages.exports),
bounded by --max (messages) and --max-seconds, the last line saying how far it got and the
command that continues it; exit codes as the engine's filter."""

from __future__ import annotations

import json
import shlex

import pytest

from console.cli import build_parser
from storeadapter.engine import Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def tidemark():
    parser, handlers = build_parser()

    def run(*args: str) -> int:
        parsed = parser.parse_args(args)
        return handlers[parsed.command](parsed)

    return run


@pytest.fixture
def orders(store):
    """Topic orders: 2 queues, 10 orders (id i in queue i % 2); odd ones paid."""
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            Message(json.dumps({"id": i}), tag="paid" if i % 2 else "open", queue=i % 2)
            for i in range(10)
        ],
    )
    return store


def lines_of(out: str) -> tuple[list[dict], dict]:
    lines = [json.loads(line) for line in out.splitlines()]
    return lines[:-1], lines[-1]["export"]


def ids(messages: list[dict]) -> list[int]:
    return [json.loads(m["body"])["id"] for m in messages]


def test_jsonl_writes_every_match_then_the_trailer(orders, tidemark, capsys):
    assert tidemark("filter", "orders", 'tag == "paid"', "--jsonl") == 0

    messages, trailer = lines_of(capsys.readouterr().out)
    assert ids(messages) == [1, 3, 5, 7, 9]
    assert (trailer["complete"], trailer["messages"], trailer["continue"]) == (True, 5, None)


def test_jsonl_lines_are_the_api_filter_exports_lines(orders, tidemark, capsys, as_viewer):
    tidemark("filter", "orders", 'tag == "paid"', "--jsonl")
    response = as_viewer.get(
        "/api/v1/topics/orders/filter/export/", {"expression": 'tag == "paid"'}
    )

    api = b"".join(response.streaming_content).decode().splitlines()
    assert capsys.readouterr().out.splitlines()[:-1] == api[:-1]


def test_jsonl_of_chosen_queues_from_a_cursor(orders, tidemark, capsys):
    tidemark("filter", "orders", "true", "--jsonl", "--queue", "0", "--cursor", "0:2")

    messages, _ = lines_of(capsys.readouterr().out)
    assert ids(messages) == [4, 6, 8]


def test_jsonl_stopped_by_max_says_the_command_that_continues_it(orders, tidemark, capsys):
    assert tidemark("filter", "orders", "true", "--jsonl", "--max", "4") == 0
    messages, trailer = lines_of(capsys.readouterr().out)
    found = ids(messages)
    assert (trailer["complete"], trailer["stopped_by"]) == (False, "records")
    while not trailer["complete"]:
        command = shlex.split(trailer["continue"])
        assert command[0] == "tidemark" and "--jsonl" in command
        assert command[command.index("--cursor") + 1] == trailer["next"]["cursor"]
        assert tidemark(*command[command.index("filter") :]) == 0
        messages, trailer = lines_of(capsys.readouterr().out)
        found += ids(messages)

    assert found == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]


def test_jsonl_with_an_expression_that_does_not_compile_exits_2_saying_where(
    orders, tidemark, capsys
):
    assert tidemark("filter", "orders", "tag ==", "--jsonl") == 2

    out, err = capsys.readouterr()
    assert out == "" and "does not compile" in err and "^" in err


def test_jsonl_of_a_missing_topic_exits_3_with_a_sentence(orders, tidemark, capsys):
    assert tidemark("filter", "nothing", "true", "--jsonl") == 3

    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and "nothing" in err


def test_jsonl_refuses_the_flags_of_the_printed_scan(orders, tidemark, capsys):
    assert tidemark("filter", "orders", "true", "--jsonl", "--format", "hex") == 2

    out, err = capsys.readouterr()
    assert out == "" and "--format" in err


def test_jsonl_refuses_a_budget_beyond_the_exports(orders, tidemark, capsys):
    assert tidemark("filter", "orders", "true", "--jsonl", "--max", "0") == 2

    assert "--max" in capsys.readouterr().err
