"""What a person sees of issue 30's access and form cases: a lockout names who is paused
and until when, and an admin lifts it; a token stopped by a password change says so; a GET
on a form's URL lands on the form; a reserved or too-long topic name is refused in words."""

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_a_lockout_names_the_user_and_an_admin_lifts_it(
    page: Page, url, log_in, viewer, admin, password, settings, store
):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        Client().post(
            "/accounts/login/",
            {"username": "vera", "password": "wrong"},
            REMOTE_ADDR="127.0.0.1",
        )
    page.goto(url("/accounts/login/"))
    page.get_by_label("Username").fill("vera")
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_text("Logging in as vera from 127.0.0.1 is paused until")).to_be_visible()

    page.context.clear_cookies()
    log_in(admin)
    page.goto(url("/accounts/users/"))
    page.get_by_role("button", name="Unlock vera from 127.0.0.1").click()
    expect(page.locator("li.tm-message")).to_have_text("vera can log in from 127.0.0.1 again.")


def test_a_token_stopped_by_a_password_change_says_revoked(page: Page, url, log_in, viewer, store):
    from console.accounts.models import ApiToken

    ApiToken.issue(viewer, "deploy")
    viewer.set_password("a-brand-new-passphrase-9")
    viewer.save()
    log_in(viewer)

    page.goto(url("/accounts/tokens/"))

    expect(page.locator("td.tm-token-state")).to_have_text(
        "revoked: vera's password was changed after it was made"
    )


def test_a_get_on_a_reset_preview_lands_on_the_reset_form(
    page: Page, url, log_in, operator, billing
):
    log_in(operator)

    page.goto(url("/groups/billing/reset/preview/"))

    expect(page).to_have_url(url("/groups/billing/#reset"))
    expect(page.locator("li.tm-message")).to_contain_text("answers only a form's button")


def test_reserved_and_too_long_topic_names_are_refused_in_words(
    page: Page, url, log_in, admin, store
):
    log_in(admin)
    page.goto(url("/topics/"))
    page.get_by_text("Create a topic").click()
    page.get_by_label("Name", exact=True).fill("%DLQ%billing")
    page.get_by_label("Queues").fill("1")
    page.get_by_role("button", name="Create topic").click()
    expect(page.get_by_text("is reserved for a consumer group's dead-letter topic")).to_be_visible()

    page.get_by_label("Name", exact=True).fill("x" * 300)
    page.get_by_role("button", name="Create topic").click()

    expect(page.get_by_text("topic name is 300 characters long", exact=False)).to_be_visible()
    assert store.topics() == []
