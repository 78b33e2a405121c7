"""The typed pre-pass (native/src/filter/fast.rs) answers exactly as CEL does (issue 34,
item 1): the common shapes of an expression are evaluated on the record's bytes with a
hand-written JSON reader, and must give CEL's answer on hostile messages — malformed
JSON, members named twice, escapes in keys, deep nesting, numbers of every JSON form,
bodies that are not UTF-8. CEL alone is reached through a shape the pre-pass never takes
(`[E].all(x, x)` is E for a bool E, evaluated by the interpreter)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storeadapter.engine import filters

_FIELDS = [
    "body.order.total",
    "body.order",
    "body.n",
    "body.a.b.c",
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
def pre_pass_expressions(draw) -> str:
    def leaf() -> str:
        field = draw(st.sampled_from(_FIELDS))
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


@st.composite
def hostile_json(draw, depth: int = 0) -> str:
    """An object text built from hostile members, some nested as the paths reach."""
    members = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(_KEYS))
        if depth < 3 and draw(st.integers(0, 2)) == 0:
            value = draw(hostile_json(depth + 1))
        else:
            value = draw(st.sampled_from(_SCALARS))
        gap = draw(st.sampled_from(["", " ", "\n\t", "\r "]))
        members.append(f"{key}{gap}:{gap}{value}")
    return "{" + ", ".join(members) + "}"


@st.composite
def hostile_bodies(draw) -> bytes:
    text = draw(hostile_json()).encode("utf-8", "surrogateescape")
    text = text.replace("\xff".encode(), b"\xff")
    kind = draw(st.integers(0, 7))
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


@settings(max_examples=1500, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    pre_pass_expressions(),
    hostile_bodies(),
    st.sampled_from(["paid", "open", "", "é"]),
    st.sampled_from(["k1", "k10", "", "x"]),
    st.sampled_from(["eu", "us", ""]),
)
def test_the_pre_pass_gives_cels_answer_on_hostile_messages(source, body, tag, key, region):
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
