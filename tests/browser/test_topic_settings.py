"""Topic settings in the browser: an operator sets a topic's retention and maximum message
size, sees them in force and in the audit log; a viewer sees them without the form."""

import re

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_operator_sets_a_topics_settings_and_they_are_audited(
    page: Page, url, log_in, operator, store
):
    store.create_topic("orders", 2)
    log_in(operator)
    page.goto(url("/topics/orders/"))

    settings = page.locator("#settings")
    expect(settings.get_by_role("row", name=re.compile("^Retention"))).to_contain_text(
        "store default"
    )
    form = settings.get_by_role("form", name="Topic settings")
    form.get_by_label("Retention (hours)").fill("24")
    form.get_by_label("Maximum message size (bytes)").fill("2048")
    form.get_by_role("button", name="Save settings").click()

    expect(page).to_have_url(re.compile(r"/topics/orders/#settings$"))
    expect(page.locator("li.tm-message")).to_contain_text(
        "Saved the settings of orders: retention_hours store default → 24; "
        "max_message_bytes store default → 2,048."
    )
    row = settings.get_by_role("row", name=re.compile("^Retention"))
    expect(row).to_contain_text("24 hours")
    expect(row).to_contain_text("this topic")
    expect(form.get_by_label("Retention (hours)")).to_have_value("24")
    assert store.topic("orders").settings == {"retention_hours": 24, "max_message_bytes": 2048}

    page.goto(url("/audit/"))
    expect(page.get_by_role("row", name=re.compile("topic.settings"))).to_contain_text(
        "topic orders"
    )


def test_a_value_out_of_bounds_is_refused_beside_its_field(
    page: Page, url, log_in, operator, store
):
    store.create_topic("orders", 1)
    log_in(operator)
    page.goto(url("/topics/orders/"))
    form = page.get_by_role("form", name="Topic settings")
    field = form.get_by_label("Dedup window (seconds)")
    # The browser's own check would stop the form; a person pasting past it gets the
    # server's sentence.
    field.evaluate("input => input.removeAttribute('max')")
    field.fill("99999999")
    form.get_by_role("button", name="Save settings").click()

    expect(page.locator("#settings .tm-error")).to_contain_text("less than or equal to")
    assert store.topic("orders").settings == {}


def test_a_viewer_sees_the_settings_without_the_form(page: Page, url, log_in, viewer, store):
    store.create_topic("orders", 1)
    store.set_topic_settings("orders", {"dedup_window_s": 0})
    log_in(viewer)
    page.goto(url("/topics/orders/"))

    expect(page.locator("#settings").get_by_role("row", name=re.compile("^Dedup"))).to_contain_text(
        "0 seconds"
    )
    expect(page.get_by_role("form", name="Topic settings")).to_have_count(0)
