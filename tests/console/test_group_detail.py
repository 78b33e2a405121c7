"""/groups/<group>/: lag per queue, owners, members, offset history, the latest resets."""

import html

import pytest

from storeadapter.engine.membership import heartbeat
from storeadapter.offset_reset import apply_reset, preview_reset, reset_reason
from tests.worlds import billing_on_orders

pytestmark = [pytest.mark.django_db]

URL = "/groups/billing/"


@pytest.fixture
def billing(store):
    """Group `billing` on topic `orders` (2 queues of 5 messages): at 2 on queue 0, 5 on 1."""
    return billing_on_orders(store, committed=(2, 5), who=("worker-1", "worker-2"))


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_anonymous_is_sent_to_login_with_next(client, billing):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/groups/billing/"


def test_user_without_role_gets_403(as_nobody, billing):
    assert as_nobody.get(URL).status_code == 403


def test_unknown_group_is_a_404_page(as_viewer, billing):
    response = as_viewer.get("/groups/nobody-here/")

    assert response.status_code == 404
    assert "There is no consumer group named" in response.content.decode()


def test_invalid_group_name_is_a_404_page(as_viewer, billing):
    assert as_viewer.get("/groups/bad%20name/").status_code == 404


def test_shows_committed_max_and_lag_per_queue(as_viewer, billing):
    response = as_viewer.get(URL)

    assert response.status_code == 200
    (table,) = response.context["topic_tables"]
    assert table["topic"] == "orders"
    assert [(r.queue, r.committed, r.max_offset, r.lag) for r in table["rows"]] == [
        (0, 2, 5, 3),
        (1, 5, 5, 0),
    ]
    assert all(r.last_commit_ms is not None for r in table["rows"])


def test_shows_members_and_the_queues_they_own(as_viewer, billing):
    heartbeat(billing.path, "billing", "worker-1", ["orders"], queues=[("orders", 0)])

    response = as_viewer.get(URL)

    (table,) = response.context["topic_tables"]
    assert [r.owner for r in table["rows"]] == ["worker-1", None]
    assert [m["consumer_id"] for m in response.context["members"]] == ["worker-1"]
    assert "orders/0" in text(response)


def test_shows_the_offset_history_newest_first(as_viewer, billing):
    billing.commit_offset("billing", "orders", 0, 4, who="worker-1")

    response = as_viewer.get(URL)

    history = response.context["history"]
    assert [(h.who, h.topic, h.queue, h.old, h.new) for h in history] == [
        ("worker-1", "orders", 0, 2, 4),
        ("worker-2", "orders", 1, None, 5),
        ("worker-1", "orders", 0, None, 2),
    ]
    assert all(h.reset_id is None for h in history)


def test_a_reset_in_the_history_names_its_entry_in_the_resets_list(as_operator, billing):
    plan = preview_reset(billing, "billing", "orders", "earliest")
    apply_reset(billing, plan, who="otto", reason=reset_reason(7, "earliest"))

    response = as_operator.get(URL)

    resets = [h for h in response.context["history"] if h.who == "otto"]
    assert [(h.label, h.reset_id) for h in resets] == [("reset #7 to earliest", 7)] * 2
    assert 'href="/groups/billing/resets/#reset-7"' in response.content.decode()


def test_the_group_page_lists_its_latest_resets_with_their_undo(as_operator, billing):
    previewed = as_operator.post(URL + "reset/preview/", {"topic": "orders", "mode": "earliest"})
    as_operator.post(URL + "reset/apply/", {"token": previewed.context["token"]})

    response = as_operator.get(URL)

    (reset,) = response.context["resets"]
    assert (reset.mode, reset.moved, reset.who) == ("earliest", 2, "otto")
    assert f'href="/groups/billing/resets/{reset.pk}/undo/"' in response.content.decode()


def test_viewer_sees_no_action_forms(as_viewer, as_operator, billing):
    previewed = as_operator.post(URL + "reset/preview/", {"topic": "orders", "mode": "earliest"})
    as_operator.post(URL + "reset/apply/", {"token": previewed.context["token"]})

    content = as_viewer.get(URL).content.decode()

    assert "Reset offsets" not in content
    assert "Skip backlog" not in content
    assert "/undo/" not in content
    assert content.count("csrfmiddlewaretoken") == 1  # only the log-out form


def test_operator_sees_the_reset_form_and_skip_backlog(as_operator, billing):
    content = as_operator.get(URL).content.decode()

    assert 'action="/groups/billing/reset/preview/"' in content
    assert "Skip backlog" in content
    assert 'name="mode"' in content
