"""Bulk actions: an admin selects topics on the topic list and deletes them, typing their
number on the confirmation page (a wrong number deletes nothing)."""

import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_an_admin_deletes_the_selected_topics_after_typing_their_number(
    page: Page, url, log_in, admin, store
):
    for name in ("old.a", "old.b", "keep"):
        store.create_topic(name, 1)
    log_in(admin)
    page.goto(url("/topics/"))

    page.get_by_label("Select old.a").check()
    page.get_by_label("Select old.b").check()
    page.get_by_role("button", name="Delete selected…").click()

    expect(page.get_by_role("heading", name="Delete 2 topics")).to_be_visible()
    table = page.locator("table.tm-delete-selected")
    expect(table.get_by_role("row")).to_have_count(3)
    confirm = page.get_by_label(re.compile(r"^Type 2 \(the number of topics\)"))
    expect(confirm).to_be_focused()
    confirm.fill("3")
    page.get_by_role("button", name="Delete 2 topics").click()

    expect(page.get_by_role("alert")).to_contain_text("That is not 2")
    assert {t.name for t in store.topics()} == {"old.a", "old.b", "keep"}
    page.get_by_label(re.compile(r"^Type 2")).fill("2")
    page.get_by_label(re.compile(r"^Type 2")).press("Enter")

    expect(page).to_have_url(url("/topics/"))
    expect(page.locator("li.tm-message")).to_have_text("Deleted 2 topics: old.a, old.b.")
    expect(page.get_by_role("row", name=re.compile(r"^keep\b"))).to_be_visible()
    assert [t.name for t in store.topics()] == ["keep"]
