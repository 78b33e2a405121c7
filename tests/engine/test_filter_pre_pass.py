"""The typed pre-pass (native/src/filter/fast.rs) answers exactly as CEL does (issue 34,
item 1): the common shapes of an expression are evaluated on the record's bytes with a
hand-written JSON reader, and must give CEL's answer on hostile messages — malformed
JSON, members named twice, escapes in keys, deep nesting, numbers of every JSON form,
bodies that are not UTF-8. CEL alone is reached through a shape the pre-pass never takes
(`[E].all(x, x)` is E for a bool E, evaluated by the interpreter)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storeadapter.engine import filters
from tests.fuzzing import examples

# Not run again in the shared-layout pass: the filter's pre-pass on
# bodies, no store.
pytestmark = pytest.mark.one_layout

_FIELDS = [
    "tag",
    "key",
    "properties.region",
    "queue",
    "body_size",
]
_LITERALS = [
    "0",
    "5",
    "-1",
    "100",
    "9223372036854775807",
    "-9223372036854775808",
    '"paid"',
    '"é"',
    '""',
    "5u",
    "5.0",
    "null",
]
_OPS = ["==", "!=", "<", "<=", ">", ">="]


@st.composite
def pre_pass_expressions(draw, body_field: str = "body.order.total") -> str:
    def leaf() -> str:
        # One body path an expression (the pre-pass takes a body member only when it is
        # the one part of the body the expression reaches).
        field = draw(st.sampled_from([body_field] * len(_FIELDS) + _FIELDS))
        if draw(st.integers(0, 5)) == 0:
            return f"{field}.startsWith({draw(st.sampled_from(_LITERALS))})"
        return f"{field} {draw(st.sampled_from(_OPS))} {draw(st.sampled_from(_LITERALS))}"

    text = leaf()
    for _ in range(draw(st.integers(0, 2))):
        joiner = draw(st.sampled_from([" && ", " || "]))
        other = leaf()
        text = f"({text}){joiner}({other})" if draw(st.booleans()) else f"({other}){joiner}({text})"
    if draw(st.booleans()):
        text = f"!({text})"
    return text


_NUMBERS = [
    "0",
    "-0",
    "7",
    "150",
    "01",
    "-",
    "1.0",
    "1e2",
    "1E+2",
    "2.5e-3",
    "-5",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1e999",
    "5x",
    ".5",
    "+5",
    "0x10",
]
_SCALARS = _NUMBERS + [
    '"paid"',
    '"pa\\u0069d"',
    '"\\ud800"',
    '"a\\qb"',
    '"café"',
    '"\xff"',
    '"tab\there"',
    "true",
    "null",
    "[]",
    "{}",
    "[1, [2, [3]]]",
]
#: Leaves: plain integers and strings as often as every hostile form.
_LEAVES = ["0", "5", "150", "-3", '"paid"', '"x"'] * 4 + _SCALARS
_KEYS = [
    '"order"',
    '"total"',
    '"n"',
    '"a"',
    '"b"',
    '"c"',
    '"pad"',
    '"\\u006frder"',
    '"to\\u0074al"',
    '"\xff"',
    '"ord\\"er"',
    '""',
]


_PATHS = [["order", "total"], ["n"], ["a", "b", "c"], ["order"]]


@st.composite
def hostile_json(draw, names: list[str] | None = None) -> str:
    """An object text along one of the paths the expressions reach, with hostile members
    around it (other keys, escaped keys, the member twice) and a hostile leaf."""
    if names is None:
        names = draw(st.sampled_from(_PATHS))
    members = []
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        members.append((draw(st.sampled_from(_KEYS)), draw(st.sampled_from(_SCALARS))))
    for _ in range(draw(st.sampled_from([1, 1, 2, 2, 0]))):
        key = draw(st.sampled_from([json.dumps(names[0])] * 3 * len(_KEYS) + _KEYS))
        deeper = hostile_json(names[1:]) if len(names) > 1 else st.sampled_from(_LEAVES)
        value = draw(deeper)
        members.insert(draw(st.integers(0, len(members))), (key, value))
    gap = draw(st.sampled_from(["", " ", "\n\t", "\r "]))
    return "{" + ", ".join(f"{key}{gap}:{gap}{value}" for key, value in members) + "}"


@st.composite
def hostile_bodies(draw, names: list[str]) -> bytes:
    text = draw(hostile_json(names)).encode("utf-8", "surrogateescape")
    text = text.replace("\xff".encode(), b"\xff")
    kind = draw(st.integers(0, 12))  # 6 and above: as built
    if kind == 0:
        text = text[: draw(st.integers(0, len(text)))]  # torn
    elif kind == 1:
        text = b'{"deep": ' + b"[" * 40 + b"]" * 40 + b", " + text[1:]
    elif kind == 2:
        text = b'{"deep": ' + b"[" * 200 + b"]" * 200 + b", " + text[1:]
    elif kind == 3:
        text = b"\xef\xbb\xbf" + text
    elif kind == 4:
        text = text + b" trailing"
    elif kind == 5:
        text = b" \n" + text.replace(b",", b" ,") + b"\n"
    return text


def _agree(source: str, body: bytes, tag: str, key: str, region: str) -> None:
    try:
        fast = filters.compile_filter(source)
    except filters.FilterSyntaxError:
        return
    cel = filters.compile_filter(f"[{source}].all(x, x)")
    args = ("orders", 1, 2, 3, 4, 5, tag, [key], {"region": region}, body)
    hit, error = fast.matches(*args)
    cel_hit, cel_error = cel.matches(*args)
    assert (hit, error is None) == (cel_hit, cel_error is None), (source, body)


@st.composite
def cases(draw) -> tuple[str, bytes]:
    """An expression and a body built along the same path (so the member is often there,
    often twice, often with a hostile neighbour or leaf)."""
    names = draw(st.sampled_from(_PATHS))
    source = draw(pre_pass_expressions("body." + ".".join(names)))
    return source, draw(hostile_bodies(names))


@settings(max_examples=examples(250), deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases(),
    st.sampled_from(["paid", "open", "", "é"]),
    st.sampled_from(["k1", "k10", "", "x"]),
    st.sampled_from(["eu", "us", ""]),
)
def test_the_pre_pass_gives_cels_answer_on_hostile_messages(case, tag, key, region):
    source, body = case
    _agree(source, body, tag, key, region)


def test_the_bench_bodies_are_answered_as_cel_answers_them():
    head = json.dumps({"order": {"total": 150, "id": 3}, "pad": ""})
    body = (head[:-2] + "x" * 900 + '"}').encode()
    for source in [
        "body.order.total > 100",
        'body.order.total > 100 && tag == "paid"',
        'tag == "paid" && body.order.total > 100',
        "body.order.total == 150",
    ]:
        _agree(source, body, "paid", "k1", "eu")
        _agree(source, body[:40], "paid", "k1", "eu")


_HAND_PICKED = [
    b'{"order": {"total": 1, "total": 9}}',
    b'{"order": {"total": 9}, "order": {"total": 1}}',
    b'{"\\u006frder": {"total": 150}, "order": {"total": 7}}',
    b'{"order": {"to\\u0074al": 150, "total": 7}}',
    b'{"order": {"total": -0}}',
    b'{"order": {"total": 1e2}}',
    b'{"order": {"total": 01}}',
    b'{"order": {"total": 9223372036854775808}}',
    b'{"order": {"total": -9223372036854775808}}',
    b'{"order": {"total": "pa\\u0069d"}}',
    b'{"order": {"total": 5, "x": "\xff"}}',
    b'{"x": "\xff", "order": {"total": 5}}',
    b'{"x": "\\ud800", "order": {"total": 5}}',
    b'{"x": ' + b"[" * 200 + b"]" * 200 + b', "order": {"total": 5}}',
    b'{"order": {"total": 5, "x": ' + b"[" * 200 + b"]" * 200 + b"}}",
    b'{"order": {"total": 5 "x": 1}}',
    b'{"order": {"total": 5}, "pad": "torn',
    b'{"n": 5x}',
    b'{"n": 5',
    b'\xef\xbb\xbf{"order": {"total": 5}}',
]


def test_hand_picked_hostile_bodies_are_answered_as_cel_answers_them():
    for body in _HAND_PICKED:
        for source in [
            "body.order.total == 1",
            "body.order.total == 9",
            "body.order.total > 100",
            "body.order.total == 0",
            'body.order.total == "paid"',
            "body.n == 5",
        ]:
            _agree(source, body, "paid", "k1", "eu")
