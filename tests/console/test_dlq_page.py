"""/groups/<group>/dlq/: the group's dead letters and their redrive (one, selected, all)."""

import html

import pytest

from console.audit.models import AuditEntry
from tests.worlds import DLQ, billing_before_dead_letters, dead_letter, orders_bodies

pytestmark = [pytest.mark.django_db]

URL = "/groups/billing/dlq/"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (1 queue), no dead letters yet."""
    return billing_before_dead_letters(store)


@pytest.fixture
def letters(billing):
    """Three dead letters of `billing`; returns their ids."""
    billing.create_topic(DLQ, 1)
    return [dead_letter(billing, n, f"dead-{n}".encode(), origin_id="X") for n in range(3)]


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_anonymous_is_sent_to_login_with_next(client, billing):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/groups/billing/dlq/"


def test_user_without_role_gets_403(as_nobody, billing):
    assert as_nobody.get(URL).status_code == 403


def test_unknown_group_is_404(as_viewer, billing):
    assert as_viewer.get("/groups/nope/dlq/").status_code == 404


def test_no_dlq_topic_shows_an_empty_state(as_viewer, billing):
    response = as_viewer.get(URL)

    assert response.status_code == 200
    assert "No dead letters" in response.content.decode()


def test_lists_the_dead_letters_with_origin_error_and_tries(as_viewer, letters):
    response = as_viewer.get(URL)

    rows = response.context["rows"]
    assert [r["message_id"] for r in rows] == letters
    first = rows[0]
    assert (first["origin_topic"], first["origin_queue"], first["origin_offset"]) == (
        "orders",
        "0",
        "0",
    )
    assert first["retry_count"] == "3"
    content = html.unescape(response.content.decode())
    assert "ValueError: bad total" in content
    assert "orders/0/2" in content


def test_the_dead_letters_are_paged_by_50(as_viewer, billing):
    billing.create_topic(DLQ, 2)
    for n in range(53):
        dead_letter(billing, n, b"x", origin_id="X")

    first = as_viewer.get(URL)
    second = as_viewer.get(URL, {"page": 2})

    assert len(first.context["rows"]) == 50
    assert len(second.context["rows"]) == 3
    shown = {r["message_id"] for r in first.context["rows"] + second.context["rows"]}
    assert len(shown) == 53


def test_viewer_sees_no_redrive_forms(as_viewer, letters):
    content = as_viewer.get(URL).content.decode()

    assert "Redrive" not in content
    assert content.count("csrfmiddlewaretoken") == 1  # only the log-out form


@pytest.mark.parametrize(
    "data",
    [{"action": "all"}, {"action": "one", "message_id": "X"}, {"action": "selected"}],
)
def test_viewer_redrive_is_403_and_changes_nothing(as_viewer, billing, letters, data):
    if "message_id" in data:
        data = {**data, "message_id": letters[0]}
    if data["action"] == "selected":
        data = {**data, "ids": letters}

    response = as_viewer.post(URL, data)

    assert response.status_code == 403
    assert orders_bodies(billing) == [b"first"]
    assert not AuditEntry.objects.exists()


def test_redrive_one_sends_it_back_to_its_topic_and_audits(as_operator, billing, letters):
    response = as_operator.post(URL, {"action": "one", "message_id": letters[1]}, follow=True)

    assert orders_bodies(billing) == [b"first", b"dead-1"]
    assert "Sent 1 dead letter back to its topic." in flashes(response)
    entry = AuditEntry.objects.get(action="dlq.redrive")
    assert entry.username == "otto"
    assert entry.before == {"message_ids": [letters[1]]}
    assert entry.after["sent"][0]["topic"] == "orders"


def test_redrive_selected_sends_only_those(as_operator, billing, letters):
    as_operator.post(URL, {"action": "selected", "ids": [letters[0], letters[2]]})

    assert orders_bodies(billing) == [b"first", b"dead-0", b"dead-2"]


def test_redrive_all_sends_every_dead_letter_back(as_operator, billing, letters):
    as_operator.post(URL, {"action": "all"})

    assert orders_bodies(billing) == [b"first", b"dead-0", b"dead-1", b"dead-2"]
    entry = AuditEntry.objects.get(action="dlq.redrive")
    assert entry.before == {"message_ids": letters}  # the copies "all" chose
    assert len(entry.after["sent"]) == 3


def test_redriving_a_letter_redriven_before_says_it_was_not_sent_again(
    as_operator, billing, letters
):
    as_operator.post(URL, {"action": "one", "message_id": letters[0]})

    response = as_operator.post(URL, {"action": "one", "message_id": letters[0]}, follow=True)

    sentence = (
        "Sent 0 dead letters back to their topics. "
        "1 had been redriven before and was not sent again."
    )
    assert flashes(response)[-1] == sentence
    assert orders_bodies(billing) == [b"first", b"dead-0"]
    entry = AuditEntry.objects.filter(action="dlq.redrive").latest("id")
    assert (entry.detail, entry.after) == (sentence, {"sent": [], "duplicates": 1})


def test_redrive_all_skips_the_letters_redriven_before(as_operator, billing, letters):
    # Issue 30: "Redrive all" used to send every copy again (deduplicated or not).
    as_operator.post(URL, {"action": "one", "message_id": letters[1]})

    response = as_operator.post(URL, {"action": "all"}, follow=True)

    sentence = "Sent 2 dead letters back to their topics."
    assert flashes(response)[-1] == sentence
    entry = AuditEntry.objects.filter(action="dlq.redrive").latest("id")
    assert entry.detail == sentence
    assert entry.before == {"message_ids": [letters[0], letters[2]]}
    assert [sent["topic"] for sent in entry.after["sent"]] == ["orders", "orders"]


def test_redrive_all_asks_for_confirmation(as_operator, letters):
    content = as_operator.get(URL).content.decode()

    assert 'data-confirm="Send 3 dead messages back to their topics?"' in content
    assert "js/confirm.js" in content


def test_redrive_of_an_unknown_id_changes_nothing(as_operator, billing, letters):
    response = as_operator.post(
        URL, {"action": "selected", "ids": [letters[0], "0" * 32]}, follow=True
    )

    assert orders_bodies(billing) == [b"first"]
    assert any("Nothing was redriven" in f for f in flashes(response))
    assert not AuditEntry.objects.exists()


def test_redrive_selected_with_nothing_selected_is_an_error(as_operator, billing, letters):
    response = as_operator.post(URL, {"action": "selected"}, follow=True)

    assert orders_bodies(billing) == [b"first"]
    assert any("Select at least one" in f for f in flashes(response))


def test_redrive_all_without_dead_letters_says_so(as_operator, billing):
    response = as_operator.post(URL, {"action": "all"}, follow=True)

    assert any("no dead letters" in f for f in flashes(response))
    assert not AuditEntry.objects.exists()
