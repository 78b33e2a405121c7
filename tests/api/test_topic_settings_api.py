"""/api/v1/topics/<topic>/settings/: read by a viewer, changed by an operator, audited."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
URL = "/api/v1/topics/orders/settings/"


@pytest.fixture
def orders(store):
    store.create_topic("orders", 2)
    return store


def patch(client, data, url=URL):
    return client.patch(url, data, format="json")


@pytest.mark.parametrize("who", CLIENTS)
def test_reading_settings_needs_viewer(clients, orders, who):
    assert clients[who].get(URL).status_code == expected_status(who, "viewer", 200)


@pytest.mark.parametrize("who", CLIENTS)
def test_changing_settings_needs_operator(clients, orders, who):
    response = patch(clients[who], {"retention_hours": 24})

    assert response.status_code == expected_status(who, "operator", 200)
    assert orders.topic("orders").settings == (
        {"retention_hours": 24} if response.status_code == 200 else {}
    )


def test_a_new_topic_reads_the_store_defaults(as_viewer, orders):
    body = as_viewer.get(URL).json()

    assert body["topic"] == "orders"
    assert body["retention_hours"] == {
        "value": orders.config.retention_hours,
        "own": None,
        "default": orders.config.retention_hours,
        "unit": "hours",
    }
    assert body["max_message_bytes"]["value"] == orders.config.max_message_bytes
    assert body["dedup_window_s"]["own"] is None


def test_a_change_is_answered_kept_and_audited_with_before_and_after(as_operator, orders):
    patch(as_operator, {"retention_hours": 24, "dedup_window_s": 0})

    body = patch(as_operator, {"retention_hours": 12, "dedup_window_s": None}).json()

    assert body["retention_hours"]["value"] == 12 and body["retention_hours"]["own"] == 12
    assert body["dedup_window_s"] == {
        "value": orders.config.dedup_window_s,
        "own": None,
        "default": orders.config.dedup_window_s,
        "unit": "seconds",
    }
    assert orders.topic("orders").settings == {"retention_hours": 12}
    entry = AuditEntry.objects.order_by("-id").first()
    assert (entry.action, entry.username, entry.target) == (
        "topic.settings",
        "otto",
        "topic orders",
    )
    assert entry.before == {"retention_hours": 24, "dedup_window_s": 0}
    assert entry.after == {"retention_hours": 12, "dedup_window_s": None}
    assert "retention_hours 24 → 12" in entry.detail


def test_a_change_to_the_same_values_writes_no_audit_row(as_operator, orders):
    patch(as_operator, {"max_message_bytes": 1000})
    count = AuditEntry.objects.count()

    response = patch(as_operator, {"max_message_bytes": 1000})

    assert response.status_code == 200
    assert AuditEntry.objects.count() == count


@pytest.mark.parametrize(
    "body",
    [
        {"retention_hours": 0},
        {"retention_hours": 87_601},
        {"max_message_bytes": "big"},
        {"dedup_window_s": 1.5},
        {"colour": 3},
        [],
    ],
)
def test_a_bad_setting_is_a_400_and_nothing_changes(as_operator, orders, body):
    response = patch(as_operator, body)

    assert response.status_code == 400
    assert error_of(response)["message"]
    assert orders.topic("orders").settings == {}


def test_an_unknown_topic_is_a_404(as_operator, orders):
    response = patch(as_operator, {"retention_hours": 5}, url="/api/v1/topics/nope/settings/")

    assert response.status_code == 404


def test_an_append_over_the_topics_limit_is_a_413(as_operator, orders):
    patch(as_operator, {"max_message_bytes": 10})

    response = as_operator.post(
        "/api/v1/topics/orders/messages/", {"body": "x" * 11}, format="json"
    )

    assert response.status_code == 413
