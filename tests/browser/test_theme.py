"""Dark mode (issue 34, item 6): the console follows the system's colour scheme, the
header's toggle overrides it and is remembered by the browser, a remembered choice is in
force before the page is drawn, and the Plotly charts take the theme's colours."""

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LIGHT_BG = "rgb(246, 247, 249)"
DARK_BG = "rgb(17, 21, 28)"
LIGHT_CARD = "#ffffff"
DARK_CARD = "#1a2029"

#: Records, as the <body> element is inserted, the theme then on <html>: what the first
#: paint shows.
RECORD_THEME_AT_BODY = """
new MutationObserver(function (records, observer) {
  if (document.body) {
    window.__themeAtBody = document.documentElement.getAttribute("data-theme") || "none";
    observer.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""


def body_background(page: Page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_the_console_follows_a_dark_system_preference(page: Page, url, log_in, viewer, store):
    page.emulate_media(color_scheme="dark")
    log_in(viewer)
    page.goto(url("/topics/"))

    assert body_background(page) == DARK_BG
    expect(page.get_by_role("button", name="Dark mode")).to_have_attribute("aria-pressed", "true")


@pytest.mark.browser_context_args(color_scheme="dark")
def test_a_browser_that_prefers_dark_gets_the_dark_theme_from_its_first_page(
    page: Page, url, log_in, viewer, store
):
    page.add_init_script(RECORD_THEME_AT_BODY)
    log_in(viewer)
    page.goto(url("/groups/"))

    assert body_background(page) == DARK_BG
    assert page.evaluate("window.__themeAtBody") == "none"  # the stylesheet's media query


def test_the_console_follows_a_light_system_preference(page: Page, url, log_in, viewer, store):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/topics/"))

    assert body_background(page) == LIGHT_BG
    expect(page.get_by_role("button", name="Dark mode")).to_have_attribute("aria-pressed", "false")


def test_the_toggle_turns_dark_mode_on_and_the_next_page_remembers_it(
    page: Page, url, log_in, viewer, store
):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/topics/"))

    page.get_by_role("button", name="Dark mode").click()
    assert body_background(page) == DARK_BG
    page.goto(url("/groups/"))

    assert body_background(page) == DARK_BG
    expect(page.get_by_role("button", name="Dark mode")).to_have_attribute("aria-pressed", "true")


def test_a_remembered_theme_is_on_the_page_before_its_body_is_drawn(
    page: Page, url, log_in, viewer, store
):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/topics/"))
    page.get_by_role("button", name="Dark mode").click()
    page.add_init_script(RECORD_THEME_AT_BODY)

    page.goto(url("/groups/"))

    assert page.evaluate("window.__themeAtBody") == "dark"


def test_the_toggle_turns_a_dark_system_preference_light(page: Page, url, log_in, viewer, store):
    page.emulate_media(color_scheme="dark")
    log_in(viewer)
    page.goto(url("/topics/"))

    page.get_by_role("button", name="Dark mode").click()
    page.reload()

    assert body_background(page) == LIGHT_BG
    assert page.evaluate("localStorage.getItem('tidemark-theme')") == "light"


def test_toggling_back_to_the_systems_theme_follows_the_system_again(
    page: Page, url, log_in, viewer, store
):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/topics/"))
    toggle = page.get_by_role("button", name="Dark mode")
    toggle.click()
    toggle.click()

    page.emulate_media(color_scheme="dark")

    assert page.evaluate("localStorage.getItem('tidemark-theme')") is None
    assert body_background(page) == DARK_BG
    expect(toggle).to_have_attribute("aria-pressed", "true")


# ------------------------------------------------------------------------- charts


@pytest.fixture
def sampled(billing):
    """Two metric samples ten seconds apart (the dashboard's chart has a line to draw)."""
    from console.monitoring import current
    from console.monitoring.sampler import take_sample
    from storeadapter.engine import clock

    start = clock.now_ms()
    take_sample(start - 10_000)
    billing.append("orders", b"more", queue=0)
    take_sample(start)
    current._cache.update(token=None, groups=None)
    return billing


def chart_colours(page: Page) -> dict:
    plot = page.locator(".tm-chart [data-chart-plot]").first
    expect(plot.locator(".main-svg").first).to_be_visible(timeout=15_000)
    return plot.evaluate(
        "p => ({paper: p._fullLayout.paper_bgcolor, plot: p._fullLayout.plot_bgcolor,"
        " font: p._fullLayout.font.color, grid: p._fullLayout.yaxis.gridcolor})"
    )


def test_a_chart_is_drawn_in_the_dark_theme_of_the_system(page: Page, url, log_in, viewer, sampled):
    page.emulate_media(color_scheme="dark")
    log_in(viewer)
    page.goto(url("/"))

    colours = chart_colours(page)

    assert colours == {"paper": DARK_CARD, "plot": DARK_CARD, "font": "#e3e8ef", "grid": "#2c3440"}


def test_a_drawn_chart_follows_the_toggle(page: Page, url, log_in, viewer, sampled):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/"))
    assert chart_colours(page)["paper"] == LIGHT_CARD

    page.get_by_role("button", name="Dark mode").click()

    plot = page.locator(".tm-chart [data-chart-plot]").first
    page.wait_for_function(
        "p => p._fullLayout.paper_bgcolor === '#1a2029'", arg=plot.element_handle()
    )
    assert chart_colours(page)["grid"] == "#2c3440"


def test_a_drawn_chart_follows_the_system_preference_changing(
    page: Page, url, log_in, viewer, sampled
):
    page.emulate_media(color_scheme="light")
    log_in(viewer)
    page.goto(url("/"))
    assert chart_colours(page)["paper"] == LIGHT_CARD

    page.emulate_media(color_scheme="dark")

    plot = page.locator(".tm-chart [data-chart-plot]").first
    page.wait_for_function(
        "p => p._fullLayout.paper_bgcolor === '#1a2029'", arg=plot.element_handle()
    )
