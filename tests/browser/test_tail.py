"""The live tail page (issue 34, item 2): messages show as they are appended; pause stops
them, resume goes on from where it stood; the rate cap says what it dropped."""

import pytest
from playwright.sync_api import Page, expect

# live_server flushes the database after each test; serialized_rollback puts back what
# the migrations made first (and orders these tests after the non-transactional ones).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def orders(store):
    store.create_topic("orders", 2)
    store.append("orders", b"before the page", queue=0)
    return store


def open_tail(page: Page, url, path: str = "/topics/orders/tail/") -> None:
    page.goto(url(path))
    expect(page.locator("[data-tail-status]")).to_contain_text("Live: waiting for messages")


def rows(page: Page):
    return page.locator("[data-tail-rows] tr")


def test_a_message_shows_in_the_tail_as_it_is_appended(page: Page, url, log_in, viewer, orders):
    log_in(viewer)
    open_tail(page, url)

    orders.append("orders", b"hello tail", queue=1, key="k-1")

    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("hello tail")
    expect(rows(page).first).to_contain_text("k-1")
    expect(page.get_by_text("before the page")).to_have_count(0)


def test_pause_holds_messages_back_and_resume_shows_them(page: Page, url, log_in, viewer, orders):
    log_in(viewer)
    open_tail(page, url)
    orders.append("orders", b"first", queue=0)
    expect(rows(page)).to_have_count(1)

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("[data-tail-status]")).to_contain_text("Paused")
    orders.append("orders", b"while paused", queue=1)
    page.wait_for_timeout(1000)
    expect(rows(page)).to_have_count(1)

    page.get_by_role("button", name="Resume").click()
    expect(rows(page)).to_have_count(2)
    expect(rows(page).first).to_contain_text("while paused")
    expect(page.locator("[data-tail-count]")).to_have_text("2 shown.")
    expect(page.get_by_role("button", name="Pause")).to_have_attribute("aria-pressed", "false")


def test_the_rate_cap_says_how_many_messages_it_dropped_from_the_view(
    page: Page, url, log_in, viewer, orders
):
    log_in(viewer)
    open_tail(page, url, "/topics/orders/tail/?rate=10")

    orders.append_batch("orders", [{"body": f"burst {i}", "queue": i % 2} for i in range(50)])

    expect(rows(page)).to_have_count(10)
    expect(rows(page).first).to_contain_text("burst 49")
    note = page.locator("[data-tail-dropped]")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Dropped 40 messages")
    expect(note).to_contain_text("cap of 10 a second")


def test_a_tail_of_one_queue_shows_only_that_queue(page: Page, url, log_in, viewer, orders):
    log_in(viewer)
    open_tail(page, url, "/topics/orders/tail/?queues=1")

    orders.append("orders", b"to queue 0", queue=0)
    orders.append("orders", b"to queue 1", queue=1)

    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("to queue 1")


def test_a_user_who_reads_the_topic_masked_tails_it_masked(
    page: Page, url, log_in, django_user_model, store
):
    from django.contrib.auth.models import Group

    from console.accounts.models import MaskRule, RoleRule

    store.create_topic("cards", 1)
    MaskRule.objects.create(pattern="cards", part="body", field="card.number", how="mask")
    role = Group.objects.create(name="support")
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    user = django_user_model.objects.create_user(username="sue", password=None)
    user.groups.add(role)
    log_in(user)
    open_tail(page, url, "/topics/cards/tail/")

    store.append("cards", b'{"card": {"number": "4111-1111"}, "amount": 7}', queue=0)

    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("****")
    expect(rows(page).first).not_to_contain_text("4111")


def test_a_filtered_tail_shows_only_what_the_expression_matches(
    page: Page, url, log_in, viewer, orders
):
    log_in(viewer)
    open_tail(page, url, '/topics/orders/tail/?filter=tag == "paid"')
    orders.append("orders", b"not paid", queue=0, tag="open")
    orders.append("orders", b"was paid", queue=1, tag="paid")

    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("was paid")
    expect(page.get_by_label("Filter expression")).to_have_value('tag == "paid"')


def test_the_export_link_downloads_what_arrived_since_the_page_opened(
    page: Page, url, log_in, viewer, orders
):
    log_in(viewer)
    open_tail(page, url)
    orders.append("orders", b"after the page", queue=1)
    expect(rows(page)).to_have_count(1)

    with page.expect_download() as download:
        page.get_by_role("link", name="Export JSON Lines").click()

    text = download.value.path().read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 2 and "after the page" in lines[0]
    assert "before the page" not in text
    assert '"complete": true' in lines[1]
    assert download.value.suggested_filename == "orders-tail.jsonl"
