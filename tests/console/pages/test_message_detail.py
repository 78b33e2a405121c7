"""/messages/<id>/: fields, properties, body as text / JSON / hex, download, neighbours."""

import json

import pytest

from console.messages import bodies
from storeadapter.engine import Message

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    return store


def send(store, body, **fields) -> str:
    return store.append("orders", body, **fields).message_id


# Access


def test_anonymous_is_sent_to_login(client, orders):
    message_id = send(orders, b"x")

    response = client.get(f"/messages/{message_id}/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_user_without_role_gets_403(as_nobody, orders):
    message_id = send(orders, b"x")

    assert as_nobody.get(f"/messages/{message_id}/").status_code == 403
    assert as_nobody.get(f"/messages/{message_id}/body").status_code == 403


# Fields


def test_detail_shows_every_field_and_the_properties(as_viewer, orders):
    sent = orders.append(
        "orders",
        b"hello",
        key=["order-1", "customer-9"],
        tag="created",
        queue=1,
        properties={"trace": "abc123", "source": "checkout"},
    )

    response = as_viewer.get(f"/messages/{sent.message_id}/")

    assert response.status_code == 200
    content = response.content.decode()
    for text in (
        sent.message_id,
        "<dt>Queue offset</dt>",
        f"<dt>Commit offset</dt><dd>{sent.commit_offset}</dd>",
        "<code>created</code>",
        "order-1",
        "customer-9",
        "<code>trace</code></td><td><code>abc123</code>",
        "<code>source</code></td><td><code>checkout</code>",
    ):
        assert text in content
    assert response.context["message"].queue == 1
    assert bodies.readable_time(sent.store_time_ms) in content


def test_keys_link_to_a_key_search(as_viewer, orders):
    message_id = send(orders, b"x", key="order-1")

    response = as_viewer.get(f"/messages/{message_id}/")

    assert b'href="/messages/?mode=key&amp;topic=orders&amp;key=order-1"' in response.content


# Body views


def test_json_view_pretty_prints(as_viewer, orders):
    message_id = send(orders, b'{"id":7,"items":["a","b"]}')

    response = as_viewer.get(f"/messages/{message_id}/", {"view": "json"})

    assert response.context["shown"].content == json.dumps({"id": 7, "items": ["a", "b"]}, indent=2)
    assert b"&quot;items&quot;: [\n" in response.content


def test_json_body_opens_in_the_json_view(as_viewer, orders):
    message_id = send(orders, b'{"a": 1}')

    response = as_viewer.get(f"/messages/{message_id}/")

    assert response.context["view"] == "json"


def test_json_view_says_when_the_body_is_not_json(as_viewer, orders):
    message_id = send(orders, b"plain words")

    response = as_viewer.get(f"/messages/{message_id}/", {"view": "json"})

    assert response.status_code == 200
    assert response.context["json_note"].startswith("The body is not JSON")
    assert b"The body is not JSON" in response.content


def test_text_view_shows_the_body(as_viewer, orders):
    message_id = send(orders, "line one\nline <two>")

    response = as_viewer.get(f"/messages/{message_id}/", {"view": "text"})

    assert b"line one\nline &lt;two&gt;</pre>" in response.content


def test_hex_view_dumps_the_bytes(as_viewer, orders):
    message_id = send(orders, b"Hi\x00\xff")

    response = as_viewer.get(f"/messages/{message_id}/", {"view": "hex"})

    assert response.context["shown"].content == "00000000  48 69 00 ff" + " " * 39 + "|Hi..|"


def test_binary_body_opens_in_the_hex_view(as_viewer, orders):
    message_id = send(orders, b"\x00\x01\x02\xff")

    response = as_viewer.get(f"/messages/{message_id}/")

    assert response.context["view"] == "hex"


def test_large_body_is_cut_with_a_download_link(as_viewer, orders):
    body = b"abcdefghij" * (100 * 1024 // 10)
    message_id = send(orders, body)

    response = as_viewer.get(f"/messages/{message_id}/", {"view": "text"})

    shown = response.context["shown"]
    assert shown.cut
    assert len(shown.content) == 64 * 1024
    assert f'href="/messages/{message_id}/body"'.encode() in response.content
    assert b"Download full body" in response.content


def test_download_returns_the_full_body(as_viewer, orders):
    body = bytes(range(256)) * 400  # 100 KiB of every byte value
    message_id = send(orders, body)

    response = as_viewer.get(f"/messages/{message_id}/body")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == f'attachment; filename="{message_id}.bin"'
    assert response.content == body


# Neighbours


def test_neighbours_link_to_the_five_before_and_after(as_viewer, orders):
    orders.append_batch("orders", [Message(f"m{i}", queue=0) for i in range(20)])
    orders.append_batch("orders", [Message(f"other{i}", queue=1) for i in range(20)])
    messages = orders.read("orders", 0, 0, 20)

    response = as_viewer.get(f"/messages/{messages[7].message_id}/")

    before = [row.message.queue_offset for row in response.context["before"]]
    after = [row.message.queue_offset for row in response.context["after"]]
    assert (before, after) == ([2, 3, 4, 5, 6], [8, 9, 10, 11, 12])
    for message in messages[2:7] + messages[8:13]:
        assert f'href="/messages/{message.message_id}/"'.encode() in response.content
    assert f'href="/messages/{messages[1].message_id}/"'.encode() not in response.content


def test_first_message_has_only_later_neighbours(as_viewer, orders):
    orders.append_batch("orders", [Message(f"m{i}", queue=0) for i in range(3)])
    first = orders.read("orders", 0, 0, 1)[0]

    response = as_viewer.get(f"/messages/{first.message_id}/")

    assert response.context["before"] == []
    assert [row.message.queue_offset for row in response.context["after"]] == [1, 2]


# Not found


def test_unknown_id_is_a_404_with_the_engines_sentence(as_viewer, orders):
    message_id = send(orders, b"x")
    unknown = message_id[:8] + "00000000FFFFFFFF"

    response = as_viewer.get(f"/messages/{unknown}/")

    assert response.status_code == 404
    assert b"outside the commit log" in response.content


def test_malformed_id_is_a_404_with_the_engines_sentence(as_viewer, orders):
    response = as_viewer.get("/messages/zzz/")

    assert response.status_code == 404
    assert b"is not a message id" in response.content


def test_download_of_an_unknown_id_is_a_404(as_viewer, orders):
    response = as_viewer.get("/messages/0000000000000000000000FF/body")

    assert response.status_code == 404


# Body helpers


def test_preview_collapses_whitespace_and_cuts_at_80_characters():
    assert bodies.preview(b"a\n  b") == "a b"
    assert bodies.preview(b"x" * 81) == "x" * 80 + "…"
    assert bodies.preview(b"") == "empty"
