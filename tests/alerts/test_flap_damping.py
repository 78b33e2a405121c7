"""Flap damping: a lag swinging across its threshold every 10 s for 5 minutes."""

from __future__ import annotations

import pytest

from console.alerts.models import AlertEvent, AlertRule
from tests.alerts.alerttools import RECIPIENT, at, evaluate, group

pytestmark = pytest.mark.django_db


def swing(seconds: int = 300) -> None:
    for second in range(0, seconds + 1, 10):
        lag = 500 if (second // 10) % 2 == 0 else 0
        evaluate([group(lag=lag)], None, at(second))


def rule(**fields) -> AlertRule:
    return AlertRule.objects.create(
        name="billing lag",
        kind=AlertRule.LAG_MESSAGES,
        threshold=100,
        recipients=RECIPIENT,
        **fields,
    )


def test_with_the_defaults_a_flapping_lag_sends_one_mail_and_keeps_one_event(mailoutbox):
    made = rule()
    assert (made.keep_firing_seconds, made.group_interval_seconds) == (120, 300)

    swing()

    assert [m.subject for m in mailoutbox] == ["[Tidemark] FIRING: billing lag (1 subject)"]
    assert AlertEvent.objects.count() == 1


def test_it_resolves_once_the_condition_stayed_clear_for_the_keep_firing_time(mailoutbox):
    rule()
    swing()  # ends holding, at 300 s
    evaluate([group(lag=0)], None, at(400))
    evaluate([group(lag=0)], None, at(510))
    assert AlertEvent.objects.get().state == AlertEvent.FIRING  # clear for 110 s only

    evaluate([group(lag=0)], None, at(520))

    assert AlertEvent.objects.get().state == AlertEvent.RESOLVED
    assert mailoutbox[-1].subject == "[Tidemark] RESOLVED: billing lag (1 subject)"


def test_without_keep_firing_the_group_interval_allows_one_state_change_mail_per_subject(
    mailoutbox,
):
    rule(keep_firing_seconds=0, group_interval_seconds=300)

    swing()

    # Fired at 0 s; every later swing falls within 300 s of a change announced, and at
    # 300 s it fires as the recipients were last told: nothing new to say.
    assert [m.subject for m in mailoutbox] == ["[Tidemark] FIRING: billing lag (1 subject)"]
    assert AlertEvent.objects.count() == 16  # every swing is still recorded


def test_a_firing_and_resolution_that_cancel_out_within_the_interval_are_not_sent(mailoutbox):
    rule(keep_firing_seconds=0, group_interval_seconds=300)
    evaluate([group(lag=500)], None, at(0))
    evaluate([group(lag=0)], None, at(10))
    evaluate([group(lag=500)], None, at(20))

    evaluate([group(lag=500)], None, at(310))

    assert [m.subject for m in mailoutbox] == ["[Tidemark] FIRING: billing lag (1 subject)"]


def test_the_rule_page_shows_the_damping(as_viewer):
    rule()
    text = as_viewer.get("/alerts/").content.decode()
    assert "keeps firing 2 min after clearing" in text
    assert "at most one state change per subject every 5 min" in text
