"""The message page says whether each group consumed the message (issue 34, item 3), from
the committed offsets, with the group's retry and DLQ copies of it."""

from __future__ import annotations

import pytest

from storeadapter.engine import dlq_topic

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(store):
    store.create_topic("orders", 1)
    ids = [store.append("orders", f"m{n}".encode()).message_id for n in range(5)]
    store.commit_offset("billing", "orders", 0, 3)
    store.commit_offset("shipping", "orders", 0, 1)
    return ids


def rows(response) -> list[tuple[str, str]]:
    return [(row["track"].group, row["said"]) for row in response.context["consumption"]]


def test_the_page_says_which_groups_consumed_the_message(as_viewer, orders):
    response = as_viewer.get(f"/messages/{orders[2]}/")

    assert rows(response) == [("billing", "consumed"), ("shipping", "not yet")]
    page = response.content.decode()
    assert 'data-group="shipping" data-state="NOT_YET"' in page
    assert "1 message before it to consume" in page


def test_the_page_links_a_dead_lettered_copy(as_viewer, store, orders):
    [message] = store.read("orders", 0, 1, 1)
    store.create_topic(dlq_topic("billing"), 1)
    copy = store.append(
        dlq_topic("billing"),
        message.body,
        properties={"ORIGIN_MESSAGE_ID": message.message_id, "RETRY_COUNT": "3"},
    )

    page = as_viewer.get(f"/messages/{orders[1]}/").content.decode()

    assert f'href="/messages/{copy.message_id}/"' in page
    assert "dead-lettered" in page and "after 3 tries" in page


def test_a_topic_no_group_consumes_says_so(as_viewer, store):
    store.create_topic("quiet", 1)
    message_id = store.append("quiet", b"x").message_id

    page = as_viewer.get(f"/messages/{message_id}/").content.decode()

    assert "No consumer group you may view has committed an offset on this topic." in page
