"""A query parameter given twice is a 400 naming it, on every operation (the schema says
one value; the last one was silently taken, so ``?rule=1&rule=2`` listed rule 2's events
and ``?rule=x&rule=2.0`` was accepted: the schema fuzz found it)."""

from __future__ import annotations

import pytest

from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=1)
    return store


@pytest.mark.parametrize(
    ("url", "query"),
    [
        ("/api/v1/alerts/events/", "rule=abc&rule=2"),
        ("/api/v1/alerts/events/", "state=firing&state=resolved"),
        ("/api/v1/messages/", "topic=orders&queue=0&queue=0"),
        ("/api/v1/topics/", "page=1&page=1"),
        ("/api/v1/topics/", "page_size=5&page_size=10"),
    ],
    ids=["a-bad-then-a-good-value", "two-good-values", "the-same-value-twice", "page", "page_size"],
)
def test_a_parameter_given_twice_is_a_400_naming_it(as_viewer, orders, url, query):
    name = query.rpartition("&")[2].partition("=")[0]

    response = as_viewer.get(f"{url}?{query}")

    assert response.status_code == 400, response.content[:300]
    error = error_of(response)
    assert list(error["details"]["fields"]) == [name]
    assert "once" in error["details"]["fields"][name][0]["message"]


def test_parameters_given_once_each_are_taken(as_viewer, orders):
    response = as_viewer.get("/api/v1/messages/?topic=orders&queue=0&page=1&page_size=5")

    assert response.status_code == 200, response.content[:300]
