"""Filtering a topic's messages by an expression on the messages page (issue 34, item 1)."""

import json

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_filter_by_expression_and_see_a_bad_one_refused(page: Page, url, log_in, viewer, store):
    store.create_topic("orders", 2)
    for total, tag in [(50, "paid"), (150, "paid"), (250, "open")]:
        store.append("orders", json.dumps({"order": {"total": total}}).encode(), tag=tag)
    log_in(viewer)
    page.goto(url("/messages/"))

    page.get_by_role("link", name="By expression").click()
    search = page.get_by_role("search")
    search.get_by_label("Topic").fill("orders")
    search.get_by_label("Expression").fill("tag == ")
    search.get_by_label("Expression").press("Enter")
    expect(page.locator(".tm-field-invalid")).to_contain_text("column")

    search = page.get_by_role("search")
    search.get_by_label("Expression").fill('body.order.total > 100 && tag == "paid"')
    search.get_by_label("Expression").press("Enter")

    results = page.locator(".tm-msg-results")
    expect(results.get_by_role("heading", name="Results")).to_be_visible()
    expect(results.locator("tbody tr")).to_have_count(1)
    expect(results).to_contain_text("1 matching of 3 records scanned")
