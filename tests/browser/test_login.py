"""Logging in through the form."""

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_login_form_lands_on_the_page_asked_for(page: Page, url, viewer, password, store):
    page.goto(url("/topics/"))

    expect(page).to_have_url(url("/accounts/login/?next=/topics/"))
    page.get_by_label("Username").fill("vera")
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")

    expect(page).to_have_url(url("/topics/"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Topics")
    expect(page.locator(".tm-user")).to_contain_text("vera")
    expect(page.locator(".tm-role")).to_have_text("viewer")
