"""Fixtures of the security suite: a store with one of everything the pages act on, and a
client per role."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone


@pytest.fixture
def world(store, admin, django_user_model) -> dict[str, Any]:
    """A topic with a message, a group with a committed offset, and one of each row that
    the pages act on (a user, an API token, an alert rule, a silence)."""
    from console.accounts.models import ApiToken
    from console.alerts.models import AlertRule, Silence
    from console.groups.models import AppliedReset
    from storeadapter.reset_moves import Moves

    store.create_topic("orders", 2)
    sent = store.append("orders", b'{"n": 1}', key="k1", queue=0)
    store.append("orders", b'{"n": 2}', key="k2", queue=0)
    store.commit_offset("billing", "orders", 0, 1)
    store.create_stream_topic("accounts", 2)
    store.append_event("accounts", "account-1", b'{"opened": true}', command_id="open")
    target = django_user_model.objects.create_user(username="target", password=None)
    token, _ = ApiToken.issue(admin, "admin's token")
    rule = AlertRule.objects.create(name="lagging", kind=AlertRule.LAG_MESSAGES, threshold=10)
    silence = Silence.objects.create(
        reason="maintenance", ends_at=timezone.now() + timedelta(hours=1)
    )
    replaced = Moves()
    replaced.add(0, 0, 0, 1)
    reset = AppliedReset.objects.create(
        group="billing", topic="orders", mode="latest", moved=1, changes=replaced.encode()
    )
    return {
        "reset_id": reset.pk,
        "message_id": sent.message_id,
        "user_id": target.pk,
        "token_id": token.pk,
        "rule_id": rule.pk,
        "silence_id": silence.pk,
    }


@pytest.fixture
def clients(request, world) -> dict[str, Client]:
    """One client per level, logged in (sessions) except the anonymous one."""
    made = {"anonymous": Client()}
    for name in ("nobody", "viewer", "operator", "admin"):
        made[name] = request.getfixturevalue(f"as_{name}")
    return made
