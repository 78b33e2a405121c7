"""``filter`` on the command line (issue 34, item 1): the messages an expression matches,
a summary that says where to go on, and exit 2 with the position of a bad expression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.test_cli import run

# Not run again in the shared-layout pass: the command line runs in its own process
# and never reads TIDEMARK_TEST_LAYOUT.
pytestmark = pytest.mark.one_layout


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 4 orders, made once: the filter only reads it."""
    path = tmp_path_factory.mktemp("cli-filter") / "store"
    assert run(path, "create-topic", "orders", "--queues", "1").returncode == 0
    lines = "\n".join(json.dumps({"total": n}) for n in (50, 150, 250, 350)) + "\n"
    assert run(path, "produce", "orders", "--queue", "0", stdin=lines).returncode == 0
    return path


def test_filter_prints_the_matching_messages(orders):
    result = run(orders, "filter", "orders", "body.total > 100", "--format", "json")

    assert result.returncode == 0, result.stderr
    totals = [json.loads(json.loads(line)["body"])["total"] for line in result.stdout.splitlines()]
    assert totals == [150, 250, 350]
    assert b"3 matched of 4 records scanned" in result.stderr


def test_a_bounded_filter_says_the_cursor_to_go_on_from(orders):
    first = run(orders, "filter", "orders", "true", "--max-records", "3")
    rest = run(orders, "filter", "orders", "true", "--cursor", "0:3")

    assert b"go on with --cursor 0:3" in first.stderr
    assert len(first.stdout.splitlines()) == 3 and len(rest.stdout.splitlines()) == 1


def test_an_expression_that_does_not_compile_exits_2_with_its_position(orders):
    result = run(orders, "filter", "orders", "body.total > ")

    assert result.returncode == 2
    assert b"does not compile" in result.stderr and b"column" in result.stderr
    assert b"Traceback" not in result.stderr
