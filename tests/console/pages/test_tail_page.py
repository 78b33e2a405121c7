"""/topics/<topic>/tail/ (issue 34, item 2): the live tail's page, for whoever may read
the topic; the polling itself is the API's (tests/api/test_tail_api.py)."""

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from console.accounts.models import RoleRule

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(store):
    store.create_topic("orders", 3)
    store.append("orders", b"m", queue=1)
    return store


def test_a_viewer_opens_the_tail_starting_at_the_queues_ends(as_viewer, orders):
    response = as_viewer.get("/topics/orders/tail/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-tail-url="/api/v1/topics/orders/tail/"' in html
    assert 'data-tail-cursor="0:0,1:1,2:0@' in html


def test_chosen_queues_start_the_cursor_at_their_ends_only(as_viewer, orders):
    html = as_viewer.get("/topics/orders/tail/", {"queues": "1,2"}).content.decode()

    assert 'data-tail-cursor="1:1,2:0@' in html
    assert 'data-tail-queues="1,2"' in html


def test_a_queue_the_topic_lacks_is_refused_with_what_it_has(as_viewer, orders):
    response = as_viewer.get("/topics/orders/tail/", {"queues": "0,9"})

    assert response.status_code == 400
    assert "queues 0 to 2" in response.content.decode()


def test_queues_that_are_no_ids_are_refused(as_viewer, orders):
    response = as_viewer.get("/topics/orders/tail/", {"queues": "zero"})

    assert response.status_code == 400
    assert "Queues are queue ids separated by commas" in response.content.decode()


def test_a_topic_that_does_not_exist_is_not_found(as_viewer, orders):
    assert as_viewer.get("/topics/nothere/tail/").status_code == 404


def test_a_role_that_may_only_view_the_topic_may_not_tail_it(orders, django_user_model):
    role = Group.objects.create(name="lookers")
    RoleRule.objects.create(role=role, kind="topic", pattern="*", actions=["view"])
    user = django_user_model.objects.create_user(username="lou", password=None)
    user.groups.add(role)
    client = Client()
    client.force_login(user)

    assert client.get("/topics/orders/tail/").status_code == 403
    assert b"/topics/orders/tail/" not in client.get("/topics/orders/").content


def test_the_topic_page_links_to_its_tail(as_viewer, orders):
    assert b'href="/topics/orders/tail/"' in as_viewer.get("/topics/orders/").content


def test_a_rate_the_page_does_not_offer_is_refused(as_viewer, orders):
    response = as_viewer.get("/topics/orders/tail/", {"rate": "7"})

    assert response.status_code == 400
    assert "Show at most 10, 50, 100, 500, 1000 messages a second" in response.content.decode()


def test_a_filter_expression_goes_to_every_poll(as_viewer, orders):
    html = as_viewer.get("/topics/orders/tail/", {"filter": 'tag == "paid"'}).content.decode()

    assert 'data-tail-filter="tag == &quot;paid&quot;"' in html
    assert "only what <code>tag == &quot;paid&quot;</code> matches" in html


def test_a_filter_that_does_not_compile_is_refused_saying_where(as_viewer, orders):
    response = as_viewer.get("/topics/orders/tail/", {"filter": "tag == "})

    assert response.status_code == 400
    html = response.content.decode()
    assert "The filter expression does not compile" in html
    assert "line 1, column" in html
    assert 'data-tail-filter=""' in html


def test_the_tail_page_links_the_export_of_what_arrived_since_it_opened(as_viewer, orders):
    html = as_viewer.get("/topics/orders/tail/", {"queues": "1", "filter": 'tag == "a"'}).content
    html = html.decode()

    start = html.index('data-tail-export href="') + len('data-tail-export href="')
    link = html[start : html.index('"', start)].replace("&amp;", "&")
    path, _, query = link.partition("?")
    from urllib.parse import parse_qs

    asked = {name: values[0] for name, values in parse_qs(query).items()}
    assert path == "/api/v1/topics/orders/tail/export/"
    assert asked["cursor"].startswith("1:1@") and asked["queues"] == "1"
    assert asked["filter"] == 'tag == "a"'


def test_the_tail_export_link_exports_what_arrived_since_the_page_opened(as_viewer, orders):
    html = as_viewer.get("/topics/orders/tail/").content.decode()
    start = html.index('data-tail-export href="') + len('data-tail-export href="')
    link = html[start : html.index('"', start)].replace("&amp;", "&")
    orders.append("orders", b"new", queue=2)

    response = as_viewer.get(link)

    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [line for line in lines if '"new"' in line]
    assert '"complete": true' in lines[-1] and len(lines) == 2
