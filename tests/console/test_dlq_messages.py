"""The DLQ page counts messages, not copies (issue 30, dead letters 4: three poison
messages, one redrive that failed again, and the page said "7 dead letters", listed one
order three times, marked nothing as redriven, and "Redrive all" sent copies again).
Rows are grouped by the original message; a redriven copy is marked (when, by whom, which
copy); "Redrive all" sends each message's latest copy not yet redriven; purge asks for
the group's name and is audited; a single row's redrive asks for confirmation."""

from __future__ import annotations

import html
import re

import pytest

from console.audit.models import AuditEntry
from tests.worlds import DLQ, dies, orders_bodies, poison_world

pytestmark = [pytest.mark.django_db]

URL = "/groups/billing/dlq/"


@pytest.fixture
def poison(store):
    return poison_world(store)


def text(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(response.content.decode())).split())


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def redrive_first_and_let_it_die_again(client, store, poison) -> None:
    client.post(URL, {"action": "one", "message_id": poison[0]})
    assert orders_bodies(store)[-1] == b"poison-0"
    dies(store, 4)  # the redriven copy, at orders 0/4, fails again


def test_copies_of_one_message_are_one_row_and_the_count_is_of_messages(as_operator, store, poison):
    redrive_first_and_let_it_die_again(as_operator, store, poison)

    response = as_operator.get(URL)

    assert len(response.context["rows"]) == 3
    assert "3 dead messages (4 copies)" in text(response)
    [first] = [row for row in response.context["rows"] if row["original_offset"] == 1]
    assert first["copy_count"] == 2


def test_a_redriven_copy_is_marked_with_when_who_and_which_copy(as_operator, store, poison):
    as_operator.post(URL, {"action": "one", "message_id": poison[0]})

    page = text(as_operator.get(URL))

    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    mark = rf"redriven {when} by otto \(copy {poison[0]} sent as orders/0/4\)"
    assert re.search(mark, page), page


def test_redrive_all_sends_only_the_latest_copy_of_each_message_not_yet_redriven(
    as_operator, store, poison
):
    redrive_first_and_let_it_die_again(as_operator, store, poison)

    response = as_operator.post(URL, {"action": "all"}, follow=True)

    assert sorted(orders_bodies(store)[5:]) == [b"poison-0", b"poison-1", b"poison-2"]
    assert flashes(response)[-1] == "Sent 3 dead letters back to their topics."


def test_redrive_all_counts_the_messages_it_would_send(as_operator, store, poison):
    as_operator.post(URL, {"action": "one", "message_id": poison[0]})

    content = html.unescape(as_operator.get(URL).content.decode())

    assert "Redrive all 2" in content
    assert 'data-confirm="Send 2 dead messages back to their topics?"' in content


def test_redrive_all_when_every_message_was_redriven_sends_nothing_and_says_why(
    as_operator, store, poison
):
    as_operator.post(URL, {"action": "all"})

    response = as_operator.post(URL, {"action": "all"}, follow=True)

    assert len(orders_bodies(store)) == 7
    assert flashes(response)[-1] == (
        "Every dead message was redriven since it last failed; nothing was sent."
    )


def test_a_single_rows_redrive_asks_for_confirmation(as_operator, poison):
    content = html.unescape(as_operator.get(URL).content.decode())

    assert f'data-confirm="Send the dead letter {poison[0]} back to orders?"' in content


def test_purge_without_the_groups_name_deletes_nothing(as_admin, store, poison):
    response = as_admin.post(URL, {"action": "purge", "confirm": "nope"}, follow=True)

    assert "Type the group's name, billing, to purge" in flashes(response)[-1]
    assert store.topic(DLQ).name == DLQ
    assert not AuditEntry.objects.filter(action="dlq.purge").exists()


def test_purge_with_the_groups_name_deletes_every_copy_and_is_audited(as_admin, store, poison):
    response = as_admin.post(URL, {"action": "purge", "confirm": "billing"}, follow=True)

    assert flashes(response)[-1] == "Purged 3 dead messages (3 copies) of billing."
    assert "No dead letters" in text(response)
    entry = AuditEntry.objects.get(action="dlq.purge")
    assert (entry.username, entry.target) == ("ada", "group billing")
    assert entry.before == {"messages": 3, "copies": 3}


def test_an_operator_purges_too_but_a_viewer_may_not(as_viewer, as_operator, store, poison):
    assert as_viewer.post(URL, {"action": "purge", "confirm": "billing"}).status_code == 403
    assert store.topic(DLQ).name == DLQ

    as_operator.post(URL, {"action": "purge", "confirm": "billing"})

    assert AuditEntry.objects.filter(action="dlq.purge").exists()


@pytest.mark.parametrize("who", ["as_viewer", "as_operator", "as_admin"])
def test_the_grouped_page_works_for_every_role(request, who, store, poison):
    client = request.getfixturevalue(who)
    redrive_first_and_let_it_die_again(logged_operator(request), store, poison)

    assert client.get(URL).status_code == 200


def logged_operator(request):
    return request.getfixturevalue("as_operator")
