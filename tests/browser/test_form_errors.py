"""A refused form comes back with the first error in view and focused (issue 30, case 6:
"An offset per queue" with 9=5 on a group page reloaded the page at its top, the error
~2,100 px below)."""

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_a_refused_reset_focuses_its_first_error(page: Page, url, log_in, operator, billing):
    page.set_viewport_size({"width": 1280, "height": 720})
    log_in(operator)
    page.goto(url("/groups/billing/"))
    reset = page.locator("#reset")
    reset.get_by_label("Topic").select_option("orders")
    reset.get_by_label("Reset to").select_option("offset")
    reset.get_by_label("Offsets").fill("9=5")
    reset.get_by_role("button", name="Preview the reset").click()

    # Queue 9 does not exist: the store's refusal is the form's (general) error.
    error = page.locator("#reset .tm-form-errors")
    expect(error).to_contain_text("not 9")
    expect(error).to_be_focused()
    expect(error).to_be_in_viewport()


def test_a_refused_field_is_focused_and_in_view(page: Page, url, log_in, operator, billing):
    page.set_viewport_size({"width": 1280, "height": 720})
    log_in(operator)
    page.goto(url("/groups/billing/"))
    reset = page.locator("#reset")
    reset.get_by_label("Topic").select_option("orders")
    reset.get_by_label("Reset to").select_option("offset")
    reset.get_by_label("Offsets").fill("0=five")
    reset.get_by_role("button", name="Preview the reset").click()

    offsets = page.locator("#reset").get_by_label("Offsets")
    expect(offsets).to_be_focused()
    expect(offsets).to_be_in_viewport()
    expect(offsets).to_have_attribute("aria-invalid", "true")
