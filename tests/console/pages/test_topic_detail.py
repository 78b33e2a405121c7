"""/topics/<topic>/: queues, groups, latest messages, and the actions by role."""

import html

import pytest

from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

URL = "/topics/orders/"


@pytest.fixture
def orders(store):
    """A topic `orders` with 2 queues."""
    store.create_topic("orders", 2)
    return store


def text(response) -> str:
    return html.unescape(response.content.decode())


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# Access and viewing


def test_anonymous_is_sent_to_login_with_next(client, orders):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/topics/orders/"


def test_user_without_role_gets_403(as_nobody, orders):
    assert as_nobody.get(URL).status_code == 403


def test_unknown_topic_is_a_404_page(as_viewer, store):
    response = as_viewer.get("/topics/missing/")

    assert response.status_code == 404
    assert "There is no topic named" in response.content.decode()


def test_invalid_topic_name_is_a_404_page(as_viewer, store):
    assert as_viewer.get("/topics/bad%20name/").status_code == 404


def test_viewer_sees_the_queues_table(as_viewer, orders):
    orders.append("orders", b"a", queue=1)
    orders.freeze_queue("orders", 0)

    response = as_viewer.get(URL)

    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(r.queue, r.min_offset, r.max_offset, r.messages, r.frozen) for r in rows] == [
        (0, 0, 0, 0, True),
        (1, 0, 1, 1, False),
    ]
    content = response.content.decode()
    assert "frozen" in content and "writable" in content


def test_viewer_sees_no_action_forms(as_viewer, orders):
    content = as_viewer.get(URL).content.decode()

    assert 'name="action"' not in content
    assert "Send a test message" not in content
    assert "Delete this topic" not in content
    assert content.count("csrfmiddlewaretoken") == 1  # only the log-out form


def test_operator_sees_operator_actions_but_not_admin_ones(as_operator, orders):
    content = as_operator.get(URL).content.decode()

    assert 'value="freeze"' in content
    assert "Send a test message" in content
    assert 'value="add_queues"' not in content
    assert 'value="remove_queue"' not in content
    assert "Delete this topic" not in content


def test_admin_sees_every_action(as_admin, orders):
    content = as_admin.get(URL).content.decode()

    for marker in (
        'value="freeze"',
        'value="add_queues"',
        'value="remove_queue"',
        'value="delete"',
    ):
        assert marker in content


def test_groups_consuming_the_topic_are_listed_with_their_lag(as_viewer, orders):
    orders.create_topic("other", 1)
    for _ in range(3):
        orders.append("orders", b"x", queue=0)
    orders.commit_offset("billing", "orders", 0, 1)
    orders.commit_offset("elsewhere", "other", 0, 0)

    consumers = as_viewer.get(URL).context["consumers"]

    assert [(c.group, c.lag) for c in consumers] == [("billing", 2)]


def test_latest_messages_are_newest_first_across_queues(as_viewer, orders):
    ids = [orders.append("orders", f"m{n}", queue=n % 2).message_id for n in range(25)]

    latest = as_viewer.get(URL).context["latest"]

    assert [m.message_id for m in latest] == ids[::-1][:20]


def test_latest_messages_show_a_body_preview_of_80_characters(as_viewer, orders):
    orders.append("orders", "x" * 200, key="k1", tag="t1")

    message = as_viewer.get(URL).context["latest"][0]

    assert len(message.body_preview) == 80
    assert (message.keys, message.tag) == (["k1"], "t1")


def test_unknown_action_changes_nothing(as_operator, orders):
    response = as_operator.post(URL, {"action": "explode"}, follow=True)

    assert "not known" in flashes(response)[0]
    assert not AuditEntry.objects.exists()


def test_put_is_not_allowed(as_admin, orders):
    assert as_admin.put(URL).status_code == 405


# Send a test message


def test_operator_sends_a_test_message(as_operator, orders):
    response = as_operator.post(
        URL,
        {"action": "send", "body": "hello there", "key": "k-1", "tag": "T", "properties": ""},
        follow=True,
    )

    latest = response.context["latest"]
    assert [m.body_preview for m in latest] == ["hello there"]
    stored = orders.get(latest[0].message_id)
    assert (stored.body, stored.keys, stored.tag) == (b"hello there", ["k-1"], "T")


def test_send_passes_properties_lines(as_operator, orders):
    as_operator.post(URL, {"action": "send", "body": "b", "properties": "a=1\n\n b = two \n"})

    entry = AuditEntry.objects.get(action="message.send")
    stored = orders.get(entry.after["message_id"])
    assert stored.properties == {"a": "1", "b": "two"}


def test_send_writes_an_audit_row_with_the_message_id(as_operator, orders):
    as_operator.post(URL, {"action": "send", "body": "hello"})

    entry = AuditEntry.objects.get(action="message.send")
    latest = orders.read("orders", entry.after["queue"], 0, 10)
    assert entry.username == "otto"
    assert entry.target == "topic orders"
    assert entry.after["message_id"] == latest[0].message_id


def test_send_with_a_bad_properties_line_is_a_form_error(as_operator, orders):
    response = as_operator.post(URL, {"action": "send", "body": "b", "properties": "no-equals"})

    assert response.status_code == 200
    assert "is not name=value" in response.context["send_form"].errors["properties"][0]
    assert orders.stats().topics["orders"].messages == 0
    assert not AuditEntry.objects.exists()


def test_send_rejected_by_the_engine_is_a_form_error(as_operator, orders):
    response = as_operator.post(URL, {"action": "send", "body": "b", "properties": "DEDUP_ID=x"})

    assert "reserved" in response.context["send_form"].non_field_errors()[0]
    assert orders.stats().topics["orders"].messages == 0
    assert not AuditEntry.objects.exists()


def test_send_without_a_body_is_a_form_error(as_operator, orders):
    response = as_operator.post(URL, {"action": "send", "body": ""})

    assert response.context["send_form"].errors["body"]
    assert orders.stats().topics["orders"].messages == 0


def test_viewer_send_gets_403_and_sends_nothing(as_viewer, orders):
    response = as_viewer.post(URL, {"action": "send", "body": "hello"})

    assert response.status_code == 403
    assert orders.stats().topics["orders"].messages == 0
    assert not AuditEntry.objects.exists()


# Freeze and unfreeze


def test_operator_freezes_a_queue(as_operator, orders):
    response = as_operator.post(URL, {"action": "freeze", "queue": "1"})

    assert response.status_code == 302
    assert orders.topic("orders").frozen == [1]
    entry = AuditEntry.objects.get(action="queue.freeze")
    assert entry.target == "topic orders queue 1"
    assert (entry.before, entry.after) == ({"frozen": False}, {"frozen": True})


def test_operator_unfreezes_a_queue(as_operator, orders):
    orders.freeze_queue("orders", 1)

    as_operator.post(URL, {"action": "unfreeze", "queue": "1"})

    assert orders.topic("orders").frozen == []
    entry = AuditEntry.objects.get(action="queue.unfreeze")
    assert (entry.before, entry.after) == ({"frozen": True}, {"frozen": False})


def test_freeze_an_unknown_queue_is_an_error_flash(as_operator, orders):
    response = as_operator.post(URL, {"action": "freeze", "queue": "9"}, follow=True)

    assert "there is no queue 9" in flashes(response)[0]
    assert orders.topic("orders").frozen == []
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("queue", ["x", "-1", ""])
def test_freeze_with_a_bad_queue_number_changes_nothing(as_operator, orders, queue):
    response = as_operator.post(URL, {"action": "freeze", "queue": queue}, follow=True)

    assert response.status_code == 200
    assert "Choose a queue" in flashes(response)[0]
    assert orders.topic("orders").frozen == []


def test_viewer_freeze_gets_403_and_changes_nothing(as_viewer, orders):
    response = as_viewer.post(URL, {"action": "freeze", "queue": "0"})

    assert response.status_code == 403
    assert orders.topic("orders").frozen == []
    assert not AuditEntry.objects.exists()


# Add and remove queues


def test_admin_adds_queues(as_admin, orders):
    response = as_admin.post(URL, {"action": "add_queues", "count": "3"})

    assert response.status_code == 302
    assert orders.topic("orders").queues == 5
    entry = AuditEntry.objects.get(action="queue.add")
    assert (entry.before, entry.after) == ({"queues": 2}, {"queues": 5})


def test_add_queues_past_the_limit_is_a_form_error(as_admin, orders):
    response = as_admin.post(URL, {"action": "add_queues", "count": "1024"})

    assert "limit of 1024" in response.context["add_form"].errors["count"][0]
    assert orders.topic("orders").queues == 2
    assert not AuditEntry.objects.exists()


def test_add_queues_with_a_bad_count_is_a_form_error(as_admin, orders):
    response = as_admin.post(URL, {"action": "add_queues", "count": "lots"})

    assert response.context["add_form"].errors["count"]
    assert orders.topic("orders").queues == 2


def test_operator_add_queues_gets_403(as_operator, orders):
    response = as_operator.post(URL, {"action": "add_queues", "count": "1"})

    assert response.status_code == 403
    assert orders.topic("orders").queues == 2


def test_remove_a_queue_that_is_not_frozen_is_refused_with_the_engines_sentence(as_admin, orders):
    response = as_admin.post(URL, {"action": "remove_queue", "queue": "1"}, follow=True)

    sentence = (
        "queue 1 of 'orders' is not frozen: freeze it, let the groups consume it to the end, "
        "then remove it"
    )
    assert flashes(response) == [sentence]
    assert sentence in text(response)
    assert orders.topic("orders").queues == 2
    assert not AuditEntry.objects.exists()


def test_remove_a_frozen_queue_with_a_lagging_group_names_the_group(as_admin, orders):
    orders.append("orders", b"x", queue=1)
    orders.commit_offset("billing", "orders", 1, 0)
    orders.freeze_queue("orders", 1)

    response = as_admin.post(URL, {"action": "remove_queue", "queue": "1"}, follow=True)

    assert "billing (1 behind)" in flashes(response)[0]
    assert orders.topic("orders").queues == 2


def test_remove_a_frozen_consumed_queue_works(as_admin, orders):
    orders.append("orders", b"x", queue=1)
    orders.append("orders", b"y", queue=1)
    orders.freeze_queue("orders", 1)
    orders.commit_offset("billing", "orders", 1, 2)

    response = as_admin.post(URL, {"action": "remove_queue", "queue": "1"})

    assert response.status_code == 302
    assert orders.topic("orders").queues == 1
    entry = AuditEntry.objects.get(action="queue.remove")
    assert entry.target == "topic orders queue 1"
    assert (entry.before, entry.after) == ({"queues": 2}, {"queues": 1})


def test_operator_remove_queue_gets_403(as_operator, orders):
    orders.freeze_queue("orders", 1)

    response = as_operator.post(URL, {"action": "remove_queue", "queue": "1"})

    assert response.status_code == 403
    assert orders.topic("orders").queues == 2


# Delete the topic


def test_delete_with_the_wrong_name_is_a_form_error(as_admin, orders):
    response = as_admin.post(URL, {"action": "delete", "confirm": "order"})

    assert response.status_code == 200
    assert "not the topic's name" in response.context["delete_form"].errors["confirm"][0]
    assert orders.topic("orders").queues == 2
    assert not AuditEntry.objects.exists()


def test_delete_with_the_right_name_deletes_and_audits(as_admin, orders):
    orders.append("orders", b"x")

    response = as_admin.post(URL, {"action": "delete", "confirm": "orders"})

    assert response.status_code == 302
    assert response.url == "/topics/"
    assert orders.topics() == []
    entry = AuditEntry.objects.get(action="topic.delete")
    assert entry.before == {"name": "orders", "queues": 2, "messages": 1}


def test_operator_delete_gets_403_and_keeps_the_topic(as_operator, orders):
    response = as_operator.post(URL, {"action": "delete", "confirm": "orders"})

    assert response.status_code == 403
    assert [t.name for t in orders.topics()] == ["orders"]


def test_viewer_delete_gets_403_and_keeps_the_topic(as_viewer, orders):
    response = as_viewer.post(URL, {"action": "delete", "confirm": "orders"})

    assert response.status_code == 403
    assert [t.name for t in orders.topics()] == ["orders"]
