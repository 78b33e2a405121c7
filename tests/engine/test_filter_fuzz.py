"""Hostile filter expressions and hostile messages (issue 34, "must hold"): compiling
either succeeds or raises FilterSyntaxError with a position inside the expression;
evaluating either answers or reports an error for that record. No panic crosses into
Python, nothing runs code or reads files, nothing loops without end (each example is
bounded by hypothesis' deadline)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storeadapter.engine import MessageStore, filters
from storeadapter.engine.filters import FilterSyntaxError
from tests.fuzzing import examples

# Not run again in the shared-layout pass: expressions, and a topic of files per queue
# (layout="files") whatever the pass.
pytestmark = pytest.mark.one_layout

_ATOMS = [
    "tag",
    "key",
    "keys",
    "properties",
    "text",
    "body",
    "body.a",
    "body.a.b",
    "body[0]",
    "queue",
    "offset",
    "born_ms",
    "stored_ms",
    "body_size",
    "topic",
    "commit_offset",
    "1",
    "-1",
    "1.5",
    "1u",
    "9223372036854775807",
    "-9223372036854775808",
    "'x'",
    '"paid"',
    "b'\\xff'",
    "null",
    "true",
    "false",
    "[]",
    "{}",
    "[1, 'a', null]",
    "{'a': 1}",
    "size(text)",
    "text.contains('a')",
    "keys.all(k, k != '')",
    "keys.exists(k, k == key)",
    "[1,2,3].map(x, x * 2)",
    "int(text)",
    "double(tag)",
    "string(body)",
    "x",
    "has(body.a)",
    "properties['region']",
    "dyn(body)",
    "type(body)",
    "1 / 0",
    "1 % 0",
    "'a' + 'b'",
]
_OPS = [" && ", " || ", " == ", " != ", " < ", " >= ", " + ", " - ", " * ", " / ", " % ", " in "]


@st.composite
def expressions(draw) -> str:
    """Expressions near the grammar: atoms joined by operators, wrapped, negated."""
    parts = [draw(st.sampled_from(_ATOMS))]
    for _ in range(draw(st.integers(0, 6))):
        parts.append(draw(st.sampled_from(_OPS)))
        atom = draw(st.sampled_from(_ATOMS))
        if draw(st.booleans()):
            atom = f"({atom})"
        if draw(st.booleans()):
            atom = "!" + atom
        parts.append(atom)
    text = "".join(parts)
    if draw(st.booleans()):
        text = text + draw(st.sampled_from([")", "(", "?", ":", ".", "[", "]", "'", '"', "\\"]))
    return text


_TEXTS = st.one_of(st.text(max_size=200), expressions())


def _compile_or_syntax_error(text: str):
    try:
        return filters.compile_filter(text)
    except FilterSyntaxError as error:
        assert 0 <= error.position <= len(text)
        assert error.line >= 1 and error.column >= 1
        return None


@settings(max_examples=examples(150), deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXTS)
def test_any_text_compiles_or_is_a_syntax_error_with_a_position(text):
    _compile_or_syntax_error(text)


_BODIES = st.one_of(
    st.binary(max_size=300),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True)
        | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5)
        ),
        max_leaves=30,
    ).map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=examples(300), deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    expressions(),
    _BODIES,
    st.text(max_size=20),
    st.lists(st.text(max_size=10), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
def test_any_expression_on_any_message_answers_or_reports_an_error(
    text, body, tag, keys, properties
):
    compiled = _compile_or_syntax_error(text)
    if compiled is None:
        return
    hit, error = compiled.matches("t", 0, 1, 2, 3, 4, tag, keys, properties, body)
    assert isinstance(hit, bool)
    assert error is None or isinstance(error, str)


def test_deep_nesting_is_refused_not_a_crash():
    for text in ["(" * 5000 + "1" + ")" * 5000, "[" * 3000, "{" * 3000, "a." * 2000 + "b"]:
        assert _compile_or_syntax_error(text) is None


def test_a_long_chain_within_the_size_bound_evaluates():
    compiled = filters.compile_filter(" && ".join(["queue == 0"] * 250))
    assert compiled.matches("t", 0, 1, 2, 3, 4, None, [], {}, b"") == (True, None)


def test_nested_comprehensions_are_refused():
    with _raises_syntax():
        filters.compile_filter("[1,2,3].all(a, [1,2,3].all(b, a != b))")


def test_there_is_no_function_that_reads_files_or_runs_code():
    for text in ["open('/etc/passwd')", "exec('1')", "matches(text, '(a+)+$')", "env('HOME')"]:
        compiled = _compile_or_syntax_error(text)
        if compiled is not None:
            hit, error = compiled.matches("t", 0, 1, 2, 3, 4, None, [], {}, b"aaaa")
            assert hit is False and error


class _raises_syntax:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        assert kind is FilterSyntaxError, kind
        return True


_HOSTILE_BODIES = [
    b"",
    b"\xff\xfe\x00binary",
    b"[" * 5000 + b"]" * 5000,
    b'{"a": ' * 500 + b"1" + b"}" * 500,
    b'{"a": {"b": 1}, "a": "dup"}',
    b'{"a": "\\ud800"}',
    b'{"a": 1e999, "b": -0, "c": 18446744073709551616}',
    json.dumps({"a": {"b": [1, 2, {"c": "x" * 10000}]}}).encode(),
]


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory):
    store = MessageStore.open(tmp_path_factory.mktemp("hostile") / "store")
    store.create_topic("h", queues=2, layout="files")
    for n, body in enumerate(_HOSTILE_BODIES * 3):
        store.append("h", body, key=f"k{n}", tag="t" if n % 2 else None, properties={"p": str(n)})
    yield store
    store.close()


@settings(max_examples=examples(150), deadline=5000, suppress_health_check=list(HealthCheck))
@given(expressions())
def test_the_native_scan_of_hostile_bodies_answers_or_refuses_the_expression(hostile_store, text):
    try:
        result = filters.scan(hostile_store, "h", text, max_seconds=2)
    except FilterSyntaxError:
        return
    assert result.scanned == len(_HOSTILE_BODIES) * 3
    assert result.errors <= result.scanned
