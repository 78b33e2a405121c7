"""/messages/?mode=filter: messages a filter expression matches (issue 34, item 1), one
budgeted scan a page, a link that goes on from where it stopped, and a form error that
says where an expression goes wrong."""

import json

import pytest

from storeadapter.engine import Message

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=2)
    store.append_batch(
        "orders",
        [
            Message(json.dumps({"order": {"total": i * 50}}), tag="paid" if i % 2 else "open")
            for i in range(10)
        ],
    )
    return store


def bodies(response) -> list[dict]:
    return [json.loads(row.message.body) for row in response.context["results"].rows]


def test_the_expression_tab_shows_its_fields(as_viewer, store):
    response = as_viewer.get("/messages/?mode=filter")

    assert response.status_code == 200
    assert b'name="expression"' in response.content and b"By expression" in response.content


def test_the_page_shows_the_matching_messages(as_viewer, orders):
    response = as_viewer.get(
        "/messages/",
        {
            "mode": "filter",
            "topic": "orders",
            "expression": 'body.order.total > 300 && tag == "paid"',
        },
    )

    assert response.status_code == 200
    assert bodies(response) == [{"order": {"total": 350}}, {"order": {"total": 450}}]
    assert "2 matching of 10 records scanned" in response.context["results"].summary


def test_a_scan_that_stops_links_to_where_it_goes_on(as_viewer, store):
    store.create_topic("many", queues=1)
    store.append_batch("many", [Message(f"m{i}") for i in range(150)])

    first = as_viewer.get("/messages/", {"mode": "filter", "topic": "many", "expression": "true"})
    results = first.context["results"]

    assert len(results.rows) == 100 and "cursor=0%3A100" in results.continue_url
    rest = as_viewer.get("/messages/" + results.continue_url)
    assert len(rest.context["results"].rows) == 50 and not rest.context["results"].continue_url


def test_an_expression_that_does_not_compile_is_a_form_error_with_its_position(as_viewer, orders):
    response = as_viewer.get(
        "/messages/", {"mode": "filter", "topic": "orders", "expression": "tag == "}
    )

    errors = response.context["form"].errors["expression"]
    assert errors and "column" in errors[0]
    assert response.context["results"] is None
