"""Patterns chosen by an admin are matched against names an outsider chose: RE2, linear
time, bounded length."""

from __future__ import annotations

import time

import pytest

from console.alerts.models import AlertEvent, AlertRule
from console.alerts.patterns import MAX_PATTERN_LENGTH, compile_pattern, pattern_matches
from tests.alerts.alerttools import at, evaluate, group, make_rule, make_silence

pytestmark = pytest.mark.django_db

HOSTILE_GROUP = "a" * 28 + "!"


def test_a_catastrophic_pattern_against_a_hostile_group_name_does_not_hang_the_evaluator():
    make_rule(scope=AlertRule.SCOPE_MATCH, group_pattern="(a+)+")
    make_silence(None, "(a+)+$", ends_at=at(3600))
    started = time.monotonic()

    evaluate([group(HOSTILE_GROUP, lag=500)], None, at(0))

    assert time.monotonic() - started < 5  # Python's re took 13.8 s per match here
    assert not AlertEvent.objects.exists()  # the name does not match


def test_patterns_are_matched_whole():
    assert pattern_matches("orders-.*", "orders-eu")
    assert not pattern_matches("orders", "orders-eu")


def test_a_back_reference_is_refused_with_a_sentence():
    with pytest.raises(ValueError, match="RE2 has no back-references"):
        compile_pattern(r"(a)\1")


def test_a_pattern_longer_than_the_bound_is_refused():
    with pytest.raises(ValueError, match=f"At most {MAX_PATTERN_LENGTH} characters"):
        compile_pattern("a" * (MAX_PATTERN_LENGTH + 1))
