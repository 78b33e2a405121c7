"""Topics: an admin creates one; an operator sends a test message."""

import re

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_admin_creates_a_topic_and_sees_it_listed(page: Page, url, log_in, admin, store):
    log_in(admin)
    page.goto(url("/topics/"))
    expect(page.get_by_text("No topics yet.")).to_be_visible()

    # The create form sits in a <details>: open it from the keyboard.
    page.locator("summary", has_text="Create a topic").focus()
    page.keyboard.press("Enter")
    form = page.get_by_role("form", name="Create a topic")
    form.get_by_label("Name").fill("payments")
    form.get_by_label("Queues").fill("3")
    form.get_by_label("Name").press("Enter")

    expect(page).to_have_url(url("/topics/payments/"))
    expect(page.locator("li.tm-message")).to_have_text("Created topic payments with 3 queues.")
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Topics").click()
    row = page.get_by_role("row", name=re.compile(r"^payments\b"))
    expect(row).to_be_visible()
    expect(row.get_by_role("cell").nth(1)).to_have_text("plain")
    expect(row.get_by_role("cell").nth(2)).to_have_text("3")
    assert [t.name for t in store.topics()] == ["payments"]


def test_operator_sends_a_test_message(page: Page, url, log_in, operator, store):
    store.create_topic("orders", 2)
    log_in(operator)
    page.goto(url("/topics/orders/"))

    send = page.locator("#send")
    send.get_by_label("Body").fill('{"order": 42}')
    send.get_by_label("Key").fill("order-42")
    send.get_by_label("Tag").fill("created")
    send.get_by_label("Properties").fill("source=browser\nattempt=1")
    # Tab from the last field reaches the button; Enter presses it.
    page.keyboard.press("Tab")
    expect(send.get_by_role("button", name="Send message")).to_be_focused()
    page.keyboard.press("Enter")

    expect(page).to_have_url(re.compile(r"/topics/orders/#latest$"))
    flash = page.locator("li.tm-message")
    expect(flash).to_contain_text(
        re.compile(r"Sent message [0-9A-Fa-f]{24} to queue \d at offset 0\.")
    )
    latest = page.locator("#latest")
    row = latest.get_by_role("row", name=re.compile("order-42"))
    expect(row).to_contain_text("created")
    expect(row).to_contain_text('{"order": 42}')
    [stored] = store.query_by_key("orders", "order-42")
    assert stored.tag == "created"
    assert stored.properties == {"source": "browser", "attempt": "1"}


def test_an_admin_creates_a_stream_topic_and_appends_an_event(
    page: Page, url, log_in, admin, store
):
    log_in(admin)
    page.goto(url("/topics/"))
    page.get_by_text("Create a topic").click()
    create = page.get_by_role("form", name="Create a topic")
    create.get_by_label("Name").fill("ledger")
    create.get_by_label("Queues").fill("2")
    create.get_by_label("Kind").select_option("stream")
    create.get_by_role("button", name="Create topic").click()

    expect(page.get_by_text("Created stream topic ledger")).to_be_visible()
    expect(page.locator('input[name="action"][value="send"]')).to_have_count(0)
    form = page.locator("#append")
    form.get_by_label("Stream id").fill("acct-1")
    form.get_by_label("Body").fill('{"amount": 5}')
    form.get_by_label("Expected version").fill("0")
    form.get_by_label("Command id").fill("cmd-1")
    form.get_by_role("button", name="Append event").click()

    expect(page.get_by_text("Appended event 1 to stream acct-1")).to_be_visible()
    expect(page.locator("#streams").get_by_role("link", name="acct-1")).to_be_visible()


def test_the_topics_list_shows_kinds_keeps_retry_topics_apart_and_sorts(
    page: Page, url, log_in, viewer, store
):
    store.create_topic("orders", 1)
    store.create_stream_topic("ledger", 1)
    store.create_topic("%RETRY%billing", 1)
    log_in(viewer)
    page.goto(url("/topics/"))

    rows = page.locator("table.tm-table tbody tr")
    expect(rows).to_have_count(2)
    expect(page.get_by_text("1 group retry topic not listed")).to_be_visible()
    page.get_by_role("link", name="Kind", exact=True).click()
    expect(rows.first.locator(".tm-kind")).to_have_text("plain")
    expect(rows.nth(1).locator(".tm-kind")).to_have_text("stream")
    page.get_by_role("link", name="show").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("a group's retry topic")
