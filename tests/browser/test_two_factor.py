"""Two-factor in the browser (issue 32, item 9): set up from the account page with the QR
code shown, then a login asks for the code after the password."""

import pytest
from playwright.sync_api import Page, expect

from tests.totpcodes import app_code

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def code(secret: str, steps_ahead: int = 0) -> str:
    return app_code(secret, steps_ahead)


def test_a_user_sets_up_totp_and_the_next_login_asks_for_the_code(
    page: Page, url, viewer, password, store
):
    page.goto(url("/accounts/login/"))
    page.get_by_label("Username").fill("vera")
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    page.get_by_role("link", name="Account").click()
    page.get_by_role("button", name="Set up an authenticator app").click()

    expect(page.get_by_role("img", name="QR code of the secret")).to_be_visible()
    secret = page.locator(".tm-secret").inner_text()
    page.get_by_label("Code from your authenticator app").fill(code(secret))
    page.get_by_role("button", name="Turn two-factor on").click()
    expect(page.locator(".tm-messages")).to_contain_text("Two-factor is on")

    page.get_by_role("button", name="Log out").click()
    page.goto(url("/topics/"))
    page.get_by_label("Username").fill("vera")
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    expect(page).to_have_url(url("/accounts/login/code/"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Enter your code")
    page.get_by_label("Code from your authenticator app").fill(code(secret, steps_ahead=1))
    page.get_by_role("button", name="Log in").click()

    expect(page).to_have_url(url("/topics/"))
    expect(page.locator(".tm-user")).to_contain_text("vera")
