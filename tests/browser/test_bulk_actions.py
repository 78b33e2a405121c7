"""Bulk actions: an admin selects topics on the topic list and deletes them, typing their
number on the confirmation page (a wrong number deletes nothing); an operator resets the
selected groups with one preview, one reset (and one undo) per group."""

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


def test_an_operator_resets_the_selected_groups_with_one_preview(
    page: Page, url, log_in, operator, billing
):
    billing.commit_offset("audit", "orders", 0, 1)
    billing.commit_offset("audit", "orders", 1, 2)
    log_in(operator)
    page.goto(url("/groups/"))

    page.get_by_label("Select billing").check()
    page.get_by_label("Select audit").check()
    page.get_by_role("button", name="Reset selected…").click()

    form = page.get_by_role("form", name="Reset the selected groups")
    form.get_by_label("Topic").select_option("orders")
    form.get_by_label("Reset to").select_option("earliest")
    form.get_by_role("button", name="Preview the resets").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Reset 2 groups: preview")
    rows = page.locator("table.tm-reset-preview tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="billing")).to_contain_text("2 of 2")
    assert billing.committed_offset("billing", "orders", 0) == 3
    page.get_by_role("button", name="Apply the 2 resets").click()

    expect(page).to_have_url(url("/groups/"))
    flashes = page.locator("li.tm-message")
    expect(flashes).to_have_count(2)
    expect(flashes.filter(has_text="billing")).to_contain_text(re.compile(r"reset #\d+ applied"))
    expect(flashes.get_by_role("link", name=re.compile("^Undo reset"))).to_have_count(2)
    for group in ("billing", "audit"):
        assert [billing.committed_offset(group, "orders", q) for q in (0, 1)] == [0, 0]
