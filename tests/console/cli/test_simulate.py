"""manage.py simulate: demo topics, traffic, three consumer groups and two alert rules."""

import pytest
from django.core.management import CommandError, call_command

from console.alerts.models import AlertRule

pytestmark = pytest.mark.django_db


def test_it_makes_topics_traffic_and_groups(store):
    call_command("simulate", "--seconds", "3", "--rate", "200")

    assert {t.name for t in store.topics()} >= {"orders", "payments"}
    assert sum(store.queue_range("orders", q)[1] for q in range(4)) > 0
    assert {"billing", "analytics"} <= set(store.groups())


def test_it_creates_the_demo_alert_rules_once(store):
    call_command("simulate", "--seconds", "0.5")
    call_command("simulate", "--seconds", "0.5")

    assert AlertRule.objects.filter(name__startswith="Demo:").count() == 2


def test_no_rules_when_asked(store):
    call_command("simulate", "--seconds", "0.5", "--no-rules")

    assert not AlertRule.objects.exists()


@pytest.mark.parametrize("args", [["--rate", "0"], ["--seconds", "-1"]])
def test_bad_arguments_are_refused_with_a_sentence(store, args):
    with pytest.raises(CommandError):
        call_command("simulate", *args)
