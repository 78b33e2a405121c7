"""The Settings section of /topics/<topic>/: shown to viewers, changed by operators,
audited; the engine then honours the values."""

import html

import pytest

from console.audit.models import AuditEntry
from storeadapter.engine import MessageTooLargeError

pytestmark = pytest.mark.django_db

URL = "/topics/orders/"


@pytest.fixture
def orders(store):
    store.create_topic("orders", 2)
    return store


def text(response) -> str:
    return html.unescape(response.content.decode())


def form(**values) -> dict:
    return {
        "action": "settings",
        "retention_hours": "",
        "max_message_bytes": "",
        "dedup_window_s": "",
        **values,
    }


def test_a_viewer_sees_the_settings_but_no_form(as_viewer, orders):
    page = text(as_viewer.get(URL))

    assert 'id="settings"' in page
    assert "store default" in page
    assert "Save settings" not in page


def test_an_operator_gets_the_form_with_the_defaults_as_placeholders(as_operator, orders):
    page = text(as_operator.get(URL))

    assert "Save settings" in page
    assert f"store default: {orders.config.max_message_bytes:,}" in page


def test_an_operator_sets_a_topics_own_values(as_operator, orders):
    response = as_operator.post(URL, form(retention_hours="24", max_message_bytes="100"))

    assert response.status_code == 302
    assert response.url.endswith("#settings")
    assert orders.topic("orders").settings == {"retention_hours": 24, "max_message_bytes": 100}
    entry = AuditEntry.objects.get(action="topic.settings")
    assert entry.username == "otto"
    assert entry.before == {"retention_hours": None, "max_message_bytes": None}
    assert entry.after == {"retention_hours": 24, "max_message_bytes": 100}
    with pytest.raises(MessageTooLargeError):
        orders.append("orders", b"x" * 101)


def test_an_empty_field_puts_the_setting_back_to_the_store_default(as_operator, orders):
    orders.set_topic_settings("orders", {"dedup_window_s": 0, "retention_hours": 5})

    as_operator.post(URL, form(retention_hours="5"))

    assert orders.topic("orders").settings == {"retention_hours": 5}
    entry = AuditEntry.objects.get(action="topic.settings")
    assert (entry.before, entry.after) == ({"dedup_window_s": 0}, {"dedup_window_s": None})


def test_saving_unchanged_settings_says_so_and_writes_no_audit_row(as_operator, orders):
    response = as_operator.post(URL, form(), follow=True)

    assert "nothing was changed" in text(response)
    assert not AuditEntry.objects.filter(action="topic.settings").exists()


def test_a_value_out_of_bounds_shows_the_form_again_with_its_error(as_operator, orders):
    response = as_operator.post(URL, form(retention_hours="0"))

    assert response.status_code == 200
    assert "greater than or equal to 1" in text(response)
    assert orders.topic("orders").settings == {}


def test_a_viewer_cannot_change_settings(as_viewer, orders):
    response = as_viewer.post(URL, form(retention_hours="24"))

    assert response.status_code == 403
    assert orders.topic("orders").settings == {}
