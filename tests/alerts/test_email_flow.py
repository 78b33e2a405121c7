"""Alert mail: one per rule and evaluation, reminders, resolutions, silences."""

from datetime import timedelta

import pytest

from console.alerts import channels
from console.alerts.models import AlertEvent, AlertRule, Notification
from tests.alerts.alerttools import (
    RECIPIENT,
    T0,
    at,
    evaluate,
    group,
    make_rule,
    make_silence,
    queue,
)

pytestmark = pytest.mark.django_db

LAGGING, CAUGHT_UP = [group(lag=500)], [group(lag=0)]


@pytest.fixture
def rule():
    return make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", repeat_seconds=600)


def test_fires_once(rule, mailoutbox):
    for second in (0, 10, 20, 30):
        evaluate(LAGGING, None, at(second))
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.subject == "[Tidemark] FIRING: billing lag (1 subject)"
    assert mail.to == [RECIPIENT]
    assert "group billing: 500 messages" in mail.body


def test_no_reminder_before_the_repeat_interval(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(599))
    assert len(mailoutbox) == 1


def test_repeats_after_the_interval(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(600))
    evaluate(LAGGING, None, at(610))
    assert [m.subject for m in mailoutbox] == [
        "[Tidemark] FIRING: billing lag (1 subject)",
        "[Tidemark] STILL FIRING: billing lag (1 subject)",
    ]


def test_reminders_keep_the_interval(rule, mailoutbox):
    for second in range(0, 1801, 100):
        evaluate(LAGGING, None, at(second))
    assert len(mailoutbox) == 4  # at 0, 600, 1200 and 1800


def test_no_reminders_when_the_interval_is_zero(rule, mailoutbox):
    AlertRule.objects.filter(pk=rule.pk).update(repeat_seconds=0)
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(86400))
    assert len(mailoutbox) == 1


def test_resolves_once(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(10))
    evaluate(CAUGHT_UP, None, at(20))
    evaluate(CAUGHT_UP, None, at(10_000))
    assert [m.subject for m in mailoutbox] == [
        "[Tidemark] FIRING: billing lag (1 subject)",
        "[Tidemark] RESOLVED: billing lag (1 subject)",
    ]
    assert "group billing: resolved at" in mailoutbox[1].body


def test_silenced_sends_nothing(rule, mailoutbox):
    make_silence(rule, "billing")
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(600))
    evaluate(CAUGHT_UP, None, at(700))
    assert mailoutbox == []
    assert AlertEvent.objects.get().state == AlertEvent.RESOLVED  # still recorded


def test_a_firing_silenced_from_its_start_is_mailed_at_the_first_evaluation_after(rule, mailoutbox):
    make_silence(rule, ends_at=T0 + timedelta(seconds=300))
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(290))
    assert mailoutbox == []
    evaluate(LAGGING, None, at(310))  # the silence is over; the repeat is 600 s away
    assert [m.subject for m in mailoutbox] == ["[Tidemark] FIRING: billing lag (1 subject)"]


def test_when_a_silence_ends_a_firing_already_mailed_is_mailed_at_the_next_evaluation(
    rule, mailoutbox
):
    evaluate(LAGGING, None, at(0))
    make_silence(rule, starts_at=at(10), ends_at=at(100))
    evaluate(LAGGING, None, at(50))
    evaluate(LAGGING, None, at(110))
    assert [m.subject for m in mailoutbox] == [
        "[Tidemark] FIRING: billing lag (1 subject)",
        "[Tidemark] STILL FIRING: billing lag (1 subject)",
    ]
    assert "A silence ended for 1 subject still firing." in mailoutbox[1].body


def test_when_a_silence_ends_it_is_mailed_even_without_reminders(rule, mailoutbox):
    AlertRule.objects.filter(pk=rule.pk).update(repeat_seconds=0)
    evaluate(LAGGING, None, at(0))
    make_silence(rule, starts_at=at(10), ends_at=at(100))
    evaluate(LAGGING, None, at(50))
    evaluate(LAGGING, None, at(110))
    assert len(mailoutbox) == 2


def test_a_silence_starting_later_mutes_nothing_until_it_starts(rule, mailoutbox):
    make_silence(rule, starts_at=at(100), ends_at=at(1000))
    evaluate(LAGGING, None, at(0))
    assert len(mailoutbox) == 1
    evaluate(CAUGHT_UP, None, at(200))  # resolved while silenced: not mailed
    assert len(mailoutbox) == 1


def test_a_silence_matches_on_the_topics_of_the_group(rule, mailoutbox):
    make_silence(rule, topic_pattern="pay.*")
    queues = [queue("billing", "payments", 0, lag=500)]
    evaluate([group("billing", lag=500, queues=queues), group("shipping", lag=500)], None, at(0))
    (mail,) = mailoutbox
    assert "group shipping" in mail.body and "group billing" not in mail.body


def test_resolution_of_a_firing_never_mailed_is_not_mailed(rule, mailoutbox):
    make_silence(rule, ends_at=T0 + timedelta(seconds=300))
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(400))
    assert mailoutbox == []


def test_silence_of_another_rule_does_not_mute(rule, mailoutbox):
    other = make_rule(AlertRule.STATUS_ERR, None, name="other")
    make_silence(other)
    evaluate(LAGGING, None, at(0))
    assert len(mailoutbox) == 1


def test_silence_for_every_rule_mutes_each(rule, mailoutbox):
    make_rule(AlertRule.LAG_SECONDS, 10, name="seconds")
    make_silence(None)
    evaluate([group(lag=500, lag_seconds=60.0)], None, at(0))
    assert AlertEvent.objects.filter(state=AlertEvent.FIRING).count() == 2
    assert mailoutbox == []


def test_silence_covers_only_matching_subjects(rule, mailoutbox):
    make_silence(rule, "billing")
    evaluate([group("billing", lag=500), group("shipping", lag=500)], None, at(0))
    (mail,) = mailoutbox
    assert "group shipping" in mail.body
    assert "group billing" not in mail.body


def test_ten_lagging_groups_make_one_email(rule, mailoutbox):
    groups = [group(f"group-{n}", lag=500) for n in range(10)]
    evaluate(groups, None, at(0))
    (mail,) = mailoutbox
    assert mail.subject == "[Tidemark] FIRING: billing lag (10 subjects)"
    assert all(f"group group-{n}:" in mail.body for n in range(10))


def test_ten_lagging_queues_make_one_email(rule, mailoutbox):
    queues = [queue("billing", "orders", n, lag=200) for n in range(10)]
    evaluate([group(lag=2000, queues=queues)], None, at(0))
    (mail,) = mailoutbox
    assert all(f"orders/{n}: lag 200" in mail.body for n in range(10))


def test_ten_groups_resolving_make_one_email(rule, mailoutbox):
    evaluate([group(f"group-{n}", lag=500) for n in range(10)], None, at(0))
    evaluate([group(f"group-{n}", lag=0) for n in range(10)], None, at(10))
    assert [m.subject for m in mailoutbox][1:] == ["[Tidemark] RESOLVED: billing lag (10 subjects)"]


def test_new_firing_and_resolution_share_one_email(rule, mailoutbox):
    evaluate([group("billing", lag=500)], None, at(0))
    evaluate([group("billing", lag=0), group("shipping", lag=500)], None, at(10))
    assert mailoutbox[1].subject == "[Tidemark] billing lag: 1 firing, 1 resolved"


def test_a_later_firing_lists_those_still_firing_and_resets_their_reminder(rule, mailoutbox):
    evaluate([group("billing", lag=500)], None, at(0))
    both = [group("billing", lag=500), group("shipping", lag=500)]
    evaluate(both, None, at(300))
    assert "Still firing (1):" in mailoutbox[1].body
    evaluate(both, None, at(600))  # billing's reminder now counts from 300
    assert len(mailoutbox) == 2
    evaluate(both, None, at(900))
    assert mailoutbox[2].subject == "[Tidemark] STILL FIRING: billing lag (2 subjects)"


def test_each_rule_sends_its_own_email(rule, mailoutbox):
    make_rule(AlertRule.LAG_SECONDS, 10, name="seconds")
    evaluate([group(lag=500, lag_seconds=60.0)], None, at(0))
    assert sorted(m.subject for m in mailoutbox) == [
        "[Tidemark] FIRING: billing lag (1 subject)",
        "[Tidemark] FIRING: seconds (1 subject)",
    ]


def test_a_rule_without_recipients_records_events_without_mail(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, recipients="")
    evaluate(LAGGING, None, at(0))
    assert AlertEvent.objects.get().state == AlertEvent.FIRING
    assert mailoutbox == []


def test_every_recipient_is_mailed(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, recipients="a@example.com\nb@example.com")
    evaluate(LAGGING, None, at(0))
    assert mailoutbox[0].to == ["a@example.com", "b@example.com"]


def test_a_failing_mail_server_does_not_stop_the_evaluation(rule, mailoutbox, monkeypatch):
    def refuse(channel, notification):
        raise OSError("connection refused")

    monkeypatch.setattr(channels.Email, "send", refuse)
    changes = evaluate(LAGGING, None, at(0))
    assert len(changes.notifications) == 1
    event = AlertEvent.objects.get()
    assert event.state == AlertEvent.FIRING
    assert event.last_notified_at is None  # never marked notified by a failed send
    row = Notification.objects.get()
    assert (row.state, row.attempts) == (Notification.PENDING, 1)
    assert row.last_error == "OSError: connection refused"
