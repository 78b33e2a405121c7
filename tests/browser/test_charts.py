"""The Plotly charts draw in a real browser, from plotly.min.js served by the console."""

import re

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def sampled(billing):
    """Two metric samples ten seconds apart, with messages arriving in between."""
    from console.monitoring import current
    from console.monitoring.sampler import take_sample
    from storeadapter.engine import clock

    start = clock.now_ms()
    take_sample(start - 10_000)
    billing.append("orders", b"more", queue=0)
    take_sample(start)
    current._cache.update(token=None, groups=None)
    return billing


@pytest.mark.parametrize("path", ["/", "/groups/billing/"], ids=["dashboard", "group"])
def test_the_chart_draws_and_its_range_buttons_work_by_keyboard(
    page: Page, url, log_in, viewer, sampled, path
):
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(viewer)
    page.goto(url(path))

    chart = page.locator(".tm-chart").first
    expect(chart.locator(".main-svg").first).to_be_visible(timeout=15_000)
    six_hours = chart.get_by_role("button", name="6 h")
    six_hours.focus()
    page.keyboard.press("Enter")
    expect(six_hours).to_have_attribute("aria-pressed", "true")
    expect(chart.locator(".main-svg").first).to_be_visible()
    assert errors == []


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


@pytest.mark.parametrize("path", ["/", "/groups/billing/"], ids=["dashboard", "group"])
def test_an_empty_range_says_so_clear_of_the_chart_titles(
    page: Page, url, log_in, viewer, billing, path
):
    log_in(viewer)
    page.goto(url(path))

    chart = page.locator(".tm-chart").first
    empty = chart.locator(".annotation-text", has_text="No samples in this range yet.")
    expect(empty).to_be_visible(timeout=15_000)
    box = empty.bounding_box()
    titles = chart.locator(".annotation-text").all()
    others = [t.bounding_box() for t in titles if "No samples" not in (t.text_content() or "")]
    assert others
    assert not [other for other in others if _overlap(box, other)]


def test_the_chart_says_when_it_was_updated_in_utc(page: Page, url, log_in, viewer, sampled):
    log_in(viewer)
    page.goto(url("/"))

    status = page.locator(".tm-chart [data-chart-status]").first
    expect(status).to_have_text(re.compile(r"Updated at"), timeout=15_000)
    assert re.fullmatch(r"Updated at \d\d:\d\d:\d\d UTC\.", (status.text_content() or "").strip())
