"""Redrive all asks first: dismissing the question sends nothing, accepting it sends all.
Copies of one message are one row, counted once, and a redriven copy says so (issue 30)."""

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
    assert questions == ["Send 2 dead messages back to their topics?"]
    assert billing.queue_range("orders", 0)[1] == 5  # nothing sent

    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    page.get_by_role("button", name="Redrive all 2").click()

    expect(page.locator("li.tm-message")).to_have_text("Sent 2 dead letters back to their topics.")


def test_a_message_redriven_and_dead_again_is_one_row_marked_redriven(
    page: Page, url, log_in, operator, store
):
    from tests.worlds import dies, poison_world

    poison = poison_world(store)
    log_in(operator)
    page.goto(url("/groups/billing/dlq/"))
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Redrive {poison[0]}").click()
    expect(page.locator("li.tm-message")).to_have_text("Sent 1 dead letter back to its topic.")
    dies(store, 4)  # the redriven order fails again

    page.goto(url("/groups/billing/dlq/"))

    expect(page.get_by_text("3 dead messages (4 copies)")).to_be_visible()
    expect(page.locator("table.tm-dlq-table tbody tr")).to_have_count(3)
    expect(page.get_by_text(f"by otto (copy {poison[0]} sent as orders/0/4)")).to_be_visible()
    expect(page.get_by_role("button", name="Redrive all 3")).to_be_visible()
