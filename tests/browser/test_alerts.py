"""/alerts/ in a browser window 1,400 px wide: a 100-character rule name (no spaces to wrap
at) keeps every table's columns in view, and the name is whole in its title."""

import pytest
from django.utils import timezone
from playwright.sync_api import Page

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LONG_NAME = "orders_lag_of_the_european_fulfilment_pipeline_" * 3
LONG_NAME = LONG_NAME[:100]


def test_a_100_character_rule_name_keeps_the_tables_in_the_window(page: Page, url, log_in, admin):
    from console.alerts.models import AlertRule
    from tests.alerts.alerttools import evaluate, group, make_rule

    make_rule(AlertRule.LAG_MESSAGES, 100, name=LONG_NAME, recipients="ops@example.com")
    evaluate([group("billing", lag=500)], None, timezone.now())
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(admin)
    page.goto(url("/alerts/"))

    for table in page.locator(".tm-table-wrap").all():
        wrap = table.bounding_box()
        for cell in table.locator("th").all():
            box = cell.bounding_box()
            assert box["x"] + box["width"] <= wrap["x"] + wrap["width"] + 1, cell.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    assert page.locator(f'[title="{LONG_NAME}"]').count() >= 1
