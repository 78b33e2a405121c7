"""The compact columns a big topic's reset plan keeps its moving queues in."""

from __future__ import annotations

import base64
import zlib

import pytest

from storeadapter.reset_moves import Moves


def _moves(rows) -> Moves:
    moves = Moves()
    for row in rows:
        moves.add(*row)
    return moves


def test_moves_come_back_from_their_text():
    moves = _moves([(0, 5, 5, 0), (7, None, 2, 9), (1_000_000, 2**40, 2**40, 3)])

    again = Moves.decode(moves.encode())

    assert list(again.changes()) == [(0, 5, 0), (7, None, 9), (1_000_000, 2**40, 3)]
    assert list(again.current) == [5, 2, 2**40]


def test_consecutive_queues_take_little_room():
    moves = _moves((q, 20, 20, 0) for q in range(100_000))

    text = moves.encode()

    assert sum(map(len, text.values())) < 20_000
    assert moves.consumed_again() == 2_000_000 and moves.skipped() == 0


def test_counts_go_both_ways():
    moves = _moves([(0, 4, 4, 0), (1, 2, 2, 9)])

    assert (moves.consumed_again(), moves.skipped()) == (4, 7)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: {**text, "queue": "not base64!"},
        lambda text: {key: value for key, value in text.items() if key != "target"},
        lambda text: {**text, "target": base64.b64encode(zlib.compress(b"\0" * 7)).decode()},
        lambda text: {**text, "target": base64.b64encode(zlib.compress(b"\0" * 8)).decode()},
        lambda text: {**text, "committed": 5},
        lambda text: {**text, "current": base64.b64encode(zlib.compress(b"x")[:-3]).decode()},
        lambda text: [],
    ],
)
def test_text_that_is_not_moves_is_refused(damage):
    text = _moves([(0, 1, 1, 0), (3, 1, 1, 0)]).encode()

    with pytest.raises(ValueError):
        Moves.decode(damage(text))


def test_a_column_longer_than_any_topic_is_refused_before_it_is_inflated():
    huge = base64.b64encode(zlib.compress(bytes(8 << 25))).decode()
    text = _moves([(0, 1, 1, 0)]).encode()

    with pytest.raises(ValueError, match="longer than any topic"):
        Moves.decode({**text, "queue": huge})
