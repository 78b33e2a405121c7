"""Keyboard shortcuts (issue 34, item 6): "/" search, "g t" topics, "g g" groups, "g a"
alerts, "?" their list; none fires while typing in a field."""

import re

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def on_dashboard(page: Page, url, log_in, viewer, store):
    log_in(viewer)
    page.goto(url("/"))
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    return page


def test_slash_focuses_the_pages_search_field(page: Page, url, log_in, viewer, store):
    log_in(viewer)
    page.goto(url("/groups/"))

    page.keyboard.press("/")

    expect(page.locator("#group-q")).to_be_focused()
    expect(page.locator("#group-q")).to_have_value("")


def test_slash_on_a_page_without_search_opens_the_message_search(on_dashboard: Page):
    on_dashboard.keyboard.press("/")

    expect(on_dashboard).to_have_url(re.compile(r"/messages/#search$"))
    first_field = on_dashboard.locator('form[role="search"] input:not([type=hidden])').first
    expect(first_field).to_be_focused()


@pytest.mark.parametrize(
    ("second", "path"),
    [("t", "/topics/"), ("g", "/groups/"), ("a", "/alerts/")],
    ids=["topics", "groups", "alerts"],
)
def test_g_then_a_letter_goes_to_its_section(on_dashboard: Page, second, path):
    on_dashboard.keyboard.press("g")
    on_dashboard.keyboard.press(second)

    expect(on_dashboard).to_have_url(re.compile(re.escape(path) + "$"))


def test_question_mark_lists_the_shortcuts_and_escape_closes_the_list(on_dashboard: Page):
    on_dashboard.keyboard.press("?")

    dialog = on_dashboard.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Go to topics")
    on_dashboard.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_no_shortcut_fires_while_typing_in_a_field(page: Page, url, log_in, viewer, store):
    log_in(viewer)
    page.goto(url("/topics/"))
    field = page.locator("#topic-q")
    field.click()

    field.press_sequentially("g t?/")

    expect(field).to_have_value("g t?/")
    expect(page).to_have_url(re.compile(r"/topics/$"))
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_hidden()


def test_a_g_long_before_the_letter_does_not_navigate(on_dashboard: Page):
    on_dashboard.keyboard.press("g")
    on_dashboard.wait_for_timeout(1700)
    on_dashboard.keyboard.press("t")

    on_dashboard.wait_for_timeout(300)
    expect(on_dashboard).to_have_url(re.compile(r"/$"))
