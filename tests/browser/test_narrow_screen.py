"""On a phone-wide screen (390 px) no console page is wider than the screen (issue 30,
case 9: pages overflowed to 767 px). Wide tables scroll inside their own box instead."""

import pytest
from playwright.sync_api import Page

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

PAGES = [
    "/",
    "/topics/",
    "/topics/orders/",
    "/groups/",
    "/groups/billing/",
    "/groups/billing/dlq/",
    "/messages/",
    "/storage/",
    "/alerts/",
    "/tasks/",
    "/audit/",
    "/accounts/account/",
    "/accounts/tokens/",
    "/accounts/users/",
]


def test_no_page_is_wider_than_a_phone(page: Page, url, log_in, admin, billing):
    from console.accounts.models import ApiToken
    from tests.worlds import DLQ

    billing.create_topic(DLQ, 1)
    billing.append(DLQ, b"dead", properties={"ORIGIN_TOPIC": "orders", "LAST_ERROR": "x" * 200})
    ApiToken.issue(admin, "deploy")
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(admin)
    wide = {}
    for path in PAGES:
        page.goto(url(path))
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            wide[path] = width

    assert wide == {}
