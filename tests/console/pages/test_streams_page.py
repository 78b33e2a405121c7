"""/streams/: find a stream of a stream topic, list its events, page through it."""

import pytest

from storeadapter.engine import fileio

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def store_options() -> dict:
    return {"segment_bytes": 4096, "max_message_bytes": 1024, "stream_index_slots": 64}


@pytest.fixture
def accounts(store):
    store.create_stream_topic("accounts", queues=2)
    return store


def _versions(response) -> list[int]:
    return [row["event"].version for row in response.context["rows"]]


def test_the_page_lists_a_streams_events_with_their_fields(accounts, as_viewer):
    accounts.append_event(
        "accounts", "a-1", b'{"amount": 5}', command_id="c1", event_type="Deposited"
    )
    accounts.append_event("accounts", "a-1", b"plain text", command_id="c2")

    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "a-1"})

    assert response.status_code == 200
    assert _versions(response) == [1, 2]
    html = response.content.decode()
    assert "Deposited" in html and "c1" in html and "c2" in html
    assert "plain text" in html
    assert "At version 2" in html


def test_bodies_show_as_json_or_hex(accounts, as_viewer):
    accounts.append_event("accounts", "a-1", b'{"amount":5}')

    as_json = as_viewer.get("/streams/", {"topic": "accounts", "stream": "a-1", "view": "json"})
    as_hex = as_viewer.get("/streams/", {"topic": "accounts", "stream": "a-1", "view": "hex"})

    assert '"amount": 5' in as_json.context["rows"][0]["content"]
    assert as_hex.context["rows"][0]["content"].startswith("00000000  7b 22 61 6d")


def test_a_long_stream_is_paged_from_any_version(accounts, as_viewer):
    for first in range(1, 121, 20):
        accounts.append_events(
            "accounts", "long", [f"e{i}".encode() for i in range(first, first + 20)]
        )

    first = as_viewer.get("/streams/", {"topic": "accounts", "stream": "long"})
    middle = as_viewer.get("/streams/", {"topic": "accounts", "stream": "long", "from_version": 51})

    assert _versions(first) == list(range(1, 51))
    assert first.context["pages"]["older"] is None
    assert "from_version=51" in first.context["pages"]["newer"]
    assert _versions(middle) == list(range(51, 101))
    assert "from_version=1" in middle.context["pages"]["older"]
    assert "from_version=71" in middle.context["pages"]["last"]


def test_a_stream_with_no_events_says_so(accounts, as_viewer):
    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "nobody"})

    assert response.status_code == 200
    assert "This stream has no events." in response.content.decode()


def test_retention_is_said_when_the_oldest_versions_are_gone(accounts, as_viewer, monkeypatch):
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (10**8, 10**9))
    for _ in range(1, 30):
        accounts.append_event("accounts", "old", b"o" * 300)
    accounts.delete_expired(now_ms=2**62)

    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "old"})

    events = response.context["events"]
    assert events.first_kept_version > 1
    assert "Retention deleted versions 1 to" in response.content.decode()


def test_bad_input_is_a_400_with_the_reason(accounts, as_viewer):
    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "a\x1fb"})
    assert response.status_code == 400
    assert "stream id" in response.content.decode()

    response = as_viewer.get("/streams/", {"topic": "nope", "stream": "a"})
    assert response.status_code == 400

    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "a", "from_version": "0"})
    assert response.status_code == 400


def test_only_stream_topics_are_offered(accounts, as_viewer):
    accounts.create_topic("orders")

    response = as_viewer.get("/streams/")

    assert response.context["topics"] == ["accounts"]


def test_html_in_events_is_escaped(accounts, as_viewer):
    accounts.append_event(
        "accounts", "<b>x</b>", b"<script>alert(1)</script>", command_id="<i>c</i>"
    )

    response = as_viewer.get("/streams/", {"topic": "accounts", "stream": "<b>x</b>"})

    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
    assert "<i>c</i>" not in html
