"""Stream topics from the console: created on /topics/, listed with their streams'
versions on their page, appended to by operators (audited), never offered the plain send form."""

from __future__ import annotations

import pytest

from console.audit.models import AuditEntry

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def store_options() -> dict:
    return {"segment_bytes": 4096, "max_message_bytes": 1024, "stream_index_slots": 64}


@pytest.fixture
def accounts(store):
    store.create_stream_topic("accounts", queues=2)
    return store


def test_an_admin_creates_a_stream_topic_from_the_topics_page(store, as_admin):
    response = as_admin.post("/topics/", {"name": "ledger", "queues": 2, "kind": "stream"})

    assert response.status_code == 302
    assert store.topic("ledger").streams
    entry = AuditEntry.objects.get(action="topic.create")
    assert entry.after == {"name": "ledger", "queues": 2, "kind": "stream"}


def test_a_topic_created_without_a_kind_is_plain(store, as_admin):
    as_admin.post("/topics/", {"name": "orders", "queues": 2})

    assert not store.topic("orders").streams


def test_an_unknown_kind_is_refused_with_a_sentence(store, as_admin):
    response = as_admin.post("/topics/", {"name": "ledger", "queues": 2, "kind": "queue"})

    assert response.status_code == 200
    assert "is not one of the available choices" in response.content.decode()
    assert store.topics() == []


def test_a_stream_topics_page_offers_the_append_form_not_the_send_form(accounts, as_operator):
    page = as_operator.get("/topics/accounts/").content.decode()

    assert 'name="action" value="append"' in page
    assert 'name="action" value="send"' not in page
    assert "create_stream_topic" not in page


def test_a_plain_topics_page_offers_the_send_form_not_the_append_form(billing, as_operator):
    page = as_operator.get("/topics/orders/").content.decode()

    assert 'name="action" value="send"' in page
    assert 'name="action" value="append"' not in page


def test_an_operator_appends_an_event_with_expected_version_and_command_id(accounts, as_operator):
    response = as_operator.post(
        "/topics/accounts/",
        {
            "action": "append",
            "stream": "a-1",
            "body": '{"amount": 5}',
            "event_type": "Deposited",
            "expected_version": "0",
            "command_id": "cmd-1",
        },
    )

    assert response.status_code == 302
    events = accounts.read_stream("accounts", "a-1")
    assert [(e.version, e.command_id, e.event_type) for e in events] == [(1, "cmd-1", "Deposited")]
    entry = AuditEntry.objects.get(action="event.append")
    assert entry.target == "topic accounts stream a-1"
    assert entry.after["version"] == 1


def test_a_wrong_expected_version_is_shown_at_the_form_and_appends_nothing(accounts, as_operator):
    accounts.append_event("accounts", "a-1", b"first")

    response = as_operator.post(
        "/topics/accounts/",
        {"action": "append", "stream": "a-1", "body": "x", "expected_version": "0"},
    )

    assert response.status_code == 200
    assert "version 1" in response.content.decode()
    assert accounts.stream_version("accounts", "a-1") == 1
    assert not AuditEntry.objects.filter(action="event.append").exists()


def test_a_viewer_may_not_append(accounts, as_viewer):
    response = as_viewer.post("/topics/accounts/", {"action": "append", "stream": "a", "body": "x"})

    assert response.status_code == 403
    assert accounts.stream_version("accounts", "a") == 0


def test_a_stream_topics_page_lists_its_streams_with_their_versions(accounts, as_viewer):
    accounts.append_events("accounts", "a-1", [b"1", b"2", b"3"])
    accounts.append_event("accounts", "b-7", b"1")

    response = as_viewer.get("/topics/accounts/")

    rows = [(row.stream_id, row.version) for row in response.context["streams"]]
    assert rows == [("a-1", 3), ("b-7", 1)]
    assert "/streams/?topic=accounts&amp;stream=a-1" in response.content.decode()


def test_the_streams_list_is_searched_by_id(accounts, as_viewer):
    accounts.append_event("accounts", "a-1", b"1")
    accounts.append_event("accounts", "b-7", b"1")

    response = as_viewer.get("/topics/accounts/", {"stream_q": "b-"})

    assert [row.stream_id for row in response.context["streams"]] == ["b-7"]


def test_the_streams_list_is_paged(accounts, as_viewer, monkeypatch):
    from console.topics import views

    monkeypatch.setattr(views, "STREAM_PAGE_SIZE", 2)
    for n in range(5):
        accounts.append_event("accounts", f"s-{n}", b"1")

    second = as_viewer.get("/topics/accounts/", {"streams_page": "2"})

    assert [row.stream_id for row in second.context["streams"]] == ["s-2", "s-3"]


def test_the_streams_page_says_how_to_create_a_stream_topic_from_the_console(store, as_viewer):
    page = as_viewer.get("/streams/").content.decode()

    assert "create_stream_topic" not in page
    assert 'href="/topics/#create"' in page


def test_a_plain_send_posted_to_a_stream_topic_points_to_the_append_form(accounts, as_operator):
    response = as_operator.post("/topics/accounts/", {"action": "send", "body": "x"}, follow=True)

    page = response.content.decode()
    assert "accounts is a stream topic: append an event to a stream instead" in page
    assert "create_stream_topic" not in page
    assert accounts.topic_stats("accounts").messages == 0
