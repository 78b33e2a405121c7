"""Redrive all asks first: dismissing the question sends nothing, accepting it sends all."""

import pytest
from playwright.sync_api import Page, expect

from storeadapter.engine import dlq_topic

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_redrive_all_asks_for_confirmation(page: Page, url, log_in, operator, billing):
    billing.create_topic(dlq_topic("billing"), 1)
    for n in range(2):
        billing.append(
            dlq_topic("billing"), f"dead {n}".encode(), properties={"ORIGIN_TOPIC": "orders"}
        )
    log_in(operator)
    page.goto(url("/groups/billing/dlq/"))
    questions = []

    def answer(dialog, accept):
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    page.get_by_role("button", name="Redrive all 2").click()
    assert questions == ["Send all 2 dead letters back to their topics?"]
    assert billing.queue_range("orders", 0)[1] == 5  # nothing sent

    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    page.get_by_role("button", name="Redrive all 2").click()

    expect(page.locator("li.tm-message")).to_have_text("Sent 2 dead letters back to their topics.")
