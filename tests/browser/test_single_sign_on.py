"""Single sign-on in chromium (issue 32, item 9): the login page's provider link, the real
provider's own login form (tests/sso_provider: django-oauth-toolkit in its own process),
and back to the page asked for with the role of the provider's groups."""

import pytest
from playwright.sync_api import Page, expect

from tests.sso_provider.harness import PASSWORD, configure_console, running_provider

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    with running_provider(tmp_path_factory.mktemp("idp"), live_server.url) as running:
        yield running


def test_signing_in_through_the_provider_lands_on_the_page_asked_for(
    page: Page, url, provider, settings, store
):
    configure_console(settings, provider)
    page.goto(url("/topics/"))

    page.get_by_role("link", name="Log in with Example IdP").click()
    page.get_by_label("Username").fill("oscar")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(url("/topics/"))
    expect(page.locator(".tm-user")).to_contain_text("oscar")
    expect(page.locator(".tm-role")).to_have_text("operator")


def test_a_provider_user_in_no_mapped_group_sees_why(page: Page, url, provider, settings, store):
    configure_console(settings, provider)
    page.goto(url("/accounts/login/"))

    page.get_by_role("link", name="Log in with Example IdP").click()
    page.get_by_label("Username").fill("mallory")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("No access to this console")
    expect(page.locator("main")).to_contain_text("contractors")
