"""A viewer sees the pages but none of the forms that change something."""

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

ACTIONS = ("Create", "Delete", "Send", "Reset", "Preview", "Freeze", "Unfreeze", "Remove")


@pytest.mark.parametrize(
    "path",
    ["/topics/", "/topics/orders/", "/groups/billing/"],
    ids=["topics", "topic", "group"],
)
def test_viewer_sees_no_action_buttons(page: Page, url, log_in, viewer, operator, billing, path):
    # A reset in the Resets list, which an operator could undo from the group page.
    from console.groups.resets import keep_preview
    from console.operations.groups import apply_kept_preview
    from storeadapter.offset_reset import preview_reset

    plan = preview_reset(billing, "billing", "orders", "earliest", None)
    apply_kept_preview(operator, "billing", keep_preview(plan).token)
    log_in(viewer)
    page.goto(url(path))

    main = page.locator("main")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    expect(page.locator(".tm-role")).to_have_text("viewer")
    # The only POST form on the page is the header's log-out button.
    expect(main.locator("form[method=post]")).to_have_count(0)
    # No folded action panel either (a legend may fold: it holds no form).
    expect(main.locator("details:has(form)")).to_have_count(0)
    # The charts' own controls (range buttons, Plotly's "Reset axes") change nothing stored.
    charts = main.locator(".tm-chart")
    # Counted once drawn (each chart says when): Plotly adds its buttons as it draws.
    for status in charts.locator("[data-chart-status]").all():
        expect(status).not_to_be_empty()
    for verb in ACTIONS:
        in_charts = charts.get_by_role("button", name=verb).count()
        expect(main.get_by_role("button", name=verb)).to_have_count(in_charts)
    expect(main.get_by_role("link", name="Undo")).to_have_count(0)
