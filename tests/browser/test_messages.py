"""Finding a message by key and opening it."""

import re

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_find_a_message_by_key_and_open_it(page: Page, url, log_in, viewer, store):
    store.create_topic("orders", 2)
    store.append("orders", b"other", key="order-41")
    sent = store.append(
        "orders", b'{"order": 42}', key="order-42", tag="created", properties={"source": "test"}
    )
    store.append("orders", b"another", key="order-43")
    log_in(viewer)
    page.goto(url("/messages/"))

    page.get_by_role("link", name="By key").click()
    search = page.get_by_role("search")
    search.get_by_label("Topic").fill("orders")
    search.get_by_label("Key").fill("order-42")
    search.get_by_label("Key").press("Enter")

    results = page.locator(".tm-msg-results")
    expect(results.get_by_role("heading", name="Results")).to_be_visible()
    rows = results.locator("tbody tr")
    expect(rows).to_have_count(1)
    link = rows.get_by_role("link", name=sent.message_id)
    link.focus()
    page.keyboard.press("Enter")

    expect(page).to_have_url(url(f"/messages/{sent.message_id}/"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Message {sent.message_id}")
    fields = page.locator(".tm-facts")
    expect(fields).to_contain_text("orders")
    expect(fields.get_by_role("link", name="order-42")).to_be_visible()
    expect(fields).to_contain_text("created")
    expect(page.locator(".tm-properties")).to_contain_text("source")
    expect(page.locator("pre.tm-msg-body")).to_contain_text(re.compile(r'"order": 42'))


def test_a_message_page_says_which_groups_consumed_it_and_opens_a_dead_letter(
    page: Page, url, log_in, viewer, store
):
    store.create_topic("orders", 1)
    first = store.append("orders", b"first", key="order-1")
    poison = store.append("orders", b"poison", key="order-2")
    store.commit_offset("billing", "orders", 0, 2)
    store.commit_offset("shipping", "orders", 0, 0)
    store.create_topic("%DLQ%billing", 1)
    dead = store.append(
        "%DLQ%billing",
        b"poison",
        key="order-2",
        properties={"ORIGIN_MESSAGE_ID": poison.message_id, "RETRY_COUNT": "3"},
    )
    log_in(viewer)
    page.goto(url(f"/messages/{poison.message_id}/"))

    table = page.locator(".tm-consumption")
    expect(page.get_by_role("heading", name="Consumed by")).to_be_visible()
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator('tr[data-group="billing"]')).to_contain_text("consumed")
    expect(table.locator('tr[data-group="shipping"]')).to_contain_text(
        "not yet (1 message before it to consume)"
    )
    table.get_by_role("link", name="%DLQ%billing 0/0").click()

    expect(page).to_have_url(url(f"/messages/{dead.message_id}/"))
    assert first.message_id != dead.message_id
