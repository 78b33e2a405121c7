"""Resetting a group's offsets: preview, apply, then undo from the Resets list."""

import re

import pytest
from playwright.sync_api import Page, expect

from storeadapter.engine import clock

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def committed_cells(page: Page) -> list[str]:
    rows = page.locator("#lag tbody tr")
    return [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]


def test_reset_offsets_preview_apply_and_undo(page: Page, url, log_in, operator, billing):
    log_in(operator)
    page.goto(url("/groups/billing/"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Group billing")
    assert committed_cells(page) == ["3", "4"]

    reset = page.locator("#reset")
    reset.get_by_label("Topic").select_option("orders")
    reset.get_by_label("Reset to").select_option("earliest")
    reset.get_by_role("button", name="Preview the reset").focus()
    page.keyboard.press("Enter")

    # The preview changes nothing yet and says what would happen.
    expect(page.get_by_role("heading", level=1)).to_have_text("Reset offsets: preview")
    preview = page.locator("table.tm-reset-preview tbody")
    expect(preview.locator("tr").nth(0)).to_contain_text(re.compile(r"3\s*→\s*0"))
    expect(preview.locator("tr").nth(1)).to_contain_text(re.compile(r"4\s*→\s*0"))
    assert billing.committed_offset("billing", "orders", 0) == 3
    page.get_by_role("button", name="Apply the reset").focus()
    page.keyboard.press("Enter")

    expect(page).to_have_url(url("/groups/billing/#resets"))
    expect(page.locator("li.tm-message")).to_contain_text(
        re.compile(
            r"Reset to earliest of billing on orders applied \(reset #\d+\): 2 queues moved; "
            "7 messages will be consumed again, 0 skipped."
        )
    )
    assert committed_cells(page) == ["0", "0"]

    # Undo from the Resets list.
    resets = page.locator("#resets")
    expect(resets.locator("tbody tr").first).to_contain_text("to earliest")
    resets.get_by_role("link", name=re.compile("^Undo")).first.focus()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", level=1)).to_have_text(
        re.compile(r"Undo reset #\d+: preview")
    )
    page.get_by_role("button", name="Apply the undo").focus()
    page.keyboard.press("Enter")

    expect(page).to_have_url(url("/groups/billing/#resets"))
    expect(page.locator("li.tm-message")).to_contain_text(
        re.compile(
            r"Undo of reset #\d+ of billing on orders applied \(reset #\d+\): 2 queues moved"
        )
    )
    assert committed_cells(page) == ["3", "4"]
    assert [billing.committed_offset("billing", "orders", q) for q in (0, 1)] == [3, 4]


def test_a_reset_and_its_undo_on_a_group_whose_consumer_is_running(
    page: Page, url, log_in, operator, store
):
    from console.core.store import store_config
    from tests.livegroup import LiveGroup, wait_until

    store.create_topic("orders", 2)
    store.append_batch("orders", [{"body": f"old {n}", "queue": n % 2} for n in range(40)])
    with LiveGroup(store, store_config(), "billing", "orders", queues=2) as live:
        log_in(operator)
        page.goto(url("/groups/billing/"))
        reset = page.locator("#reset")
        reset.get_by_label("Topic").select_option("orders")
        reset.get_by_label("Reset to").select_option("earliest")
        reset.get_by_role("button", name="Preview the reset").click()
        expect(page.locator(".tm-reset-members")).to_contain_text("1 live member")
        # The operator reads the preview while the consumer commits (was 3 s: ~150 commits).
        previewed_ms = clock.now_ms()
        wait_until(lambda: live.commits_after(previewed_ms) >= 100, what="100 commits")
        page.get_by_role("button", name="Apply the reset").click()

        message = page.locator("li.tm-message")
        expect(message).to_contain_text(
            re.compile(r"Reset to earliest of billing on orders applied")
        )
        applied_ms = clock.now_ms()
        wait_until(lambda: live.commits_after(applied_ms) >= 100, what="100 commits")

        message.get_by_role("link", name=re.compile(r"^Undo reset #\d+")).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(
            re.compile(r"Undo reset #\d+: preview")
        )
        page.get_by_role("button", name="Apply the undo").click()

        expect(page.locator("li.tm-message")).to_contain_text(
            re.compile(r"Undo of reset #\d+ of billing on orders applied")
        )
