"""/groups/: every consumer group with its lag, topics and live members, most behind first."""

import pytest

from storeadapter.engine.membership import heartbeat

pytestmark = [pytest.mark.django_db]

URL = "/groups/"


@pytest.fixture
def orders(store):
    """A topic `orders` with 2 queues of 5 messages each."""
    store.create_topic("orders", 2)
    for queue in (0, 1):
        for n in range(5):
            store.append("orders", f"m{n}".encode(), queue=queue)
    return store


def test_anonymous_is_sent_to_login_with_next(client, store):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/groups/"


def test_user_without_role_gets_403(as_nobody, store):
    assert as_nobody.get(URL).status_code == 403


def test_no_groups_shows_an_empty_state(as_viewer, store):
    response = as_viewer.get(URL)

    assert response.status_code == 200
    assert "No consumer groups yet" in response.content.decode()


def test_groups_are_listed_most_behind_first(as_viewer, orders):
    orders.commit_offset("caught-up", "orders", 0, 5)
    orders.commit_offset("caught-up", "orders", 1, 5)
    orders.commit_offset("far-behind", "orders", 0, 0)
    orders.commit_offset("a-little", "orders", 0, 5)
    orders.commit_offset("a-little", "orders", 1, 3)

    response = as_viewer.get(URL)

    rows = response.context["rows"]
    assert [(r.group, r.lag) for r in rows] == [
        ("far-behind", 10),
        ("a-little", 2),
        ("caught-up", 0),
    ]
    assert response.context["total_lag"] == 12
    assert '<a href="/groups/far-behind/">far-behind</a>' in response.content.decode()


def test_topics_and_live_members_are_counted(as_viewer, orders):
    orders.create_topic("payments", 1)
    orders.commit_offset("billing", "orders", 0, 1)
    orders.commit_offset("billing", "payments", 0, 0)
    heartbeat(orders.path, "billing", "worker-1", ["orders"], queues=[("orders", 0)])
    heartbeat(orders.path, "billing", "worker-2", ["orders"], queues=[("orders", 1)])

    (row,) = as_viewer.get(URL).context["rows"]

    assert (row.group, row.topics, row.members, row.queues_behind) == ("billing", 2, 2, 2)


def test_the_list_is_paged_by_50(as_viewer, orders):
    for n in range(51):
        orders.commit_offset(f"g{n:02d}", "orders", 0, 5)

    first = as_viewer.get(URL)
    second = as_viewer.get(URL, {"page": 2})

    assert len(first.context["rows"]) == 50
    assert len(second.context["rows"]) == 1


def test_statuses_carry_their_meaning_and_a_legend(as_viewer, store):
    store.create_topic("orders", 1)
    store.commit_offset("billing", "orders", 0, 0)

    body = as_viewer.get("/groups/").content.decode()

    assert '<dl class="tm-legend tm-status-legend"' in body
    assert "falling behind: lag above 0 and not decreasing over the window" in body


def test_a_status_badge_says_what_its_status_means_on_hover():
    from django.template import Context, Template

    badge = Template("{% load topic_tags %}{% status_badge 'STALL' %}").render(Context())

    assert 'title="STALL: commits go on but the offset does not move, with lag above 0"' in badge


def test_numbers_carry_thousands_separators(as_viewer, store):
    store.create_topic("orders", 1)
    store.append_batch("orders", [{"body": b"m"}] * 1234)
    store.commit_offset("billing", "orders", 0, 0)

    body = as_viewer.get("/groups/").content.decode()

    assert "<strong>1,234</strong>" in body


def test_the_header_links_keep_the_search_and_drop_the_page(as_viewer, orders):
    orders.commit_offset("billing", "orders", 0, 1)

    response = as_viewer.get(URL + "?q=bill&sort=name&page=1")

    html = response.content.decode()
    assert 'href="?q=bill&amp;sort=-name">Group</a>' in html
    for sort in ("status", "lag", "lag_seconds", "consume_rate", "queues_behind", "topics"):
        assert f'href="?q=bill&amp;sort={sort}"' in html, sort
