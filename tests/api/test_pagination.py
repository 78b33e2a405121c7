"""One pagination rule for every list (issue 32, case 7): a page size of 0, -1, nan or abc
is a 400 naming page_size (it was silently 50), and page=abc is a 400 on every list (it was
a 404 on the topic list and a 400 on the message search)."""

from __future__ import annotations

import pytest

from tests.api.apitools import error_of

pytestmark = pytest.mark.django_db

LISTS = {
    "topics": ("/api/v1/topics/", {}),
    "message-search": ("/api/v1/messages/", {"topic": "orders", "queue": 0}),
}


@pytest.fixture
def orders(store):
    store.create_topic("orders", queues=1)
    return store


@pytest.mark.parametrize("size", ["0", "-1", "nan", "abc"])
@pytest.mark.parametrize("name", list(LISTS))
def test_a_page_size_that_is_not_a_whole_number_from_1_is_a_400(as_viewer, orders, name, size):
    url, query = LISTS[name]

    response = as_viewer.get(url, {**query, "page_size": size})

    assert response.status_code == 400
    error = error_of(response)
    assert error["message"].startswith("page_size: ")
    assert list(error["details"]["fields"]) == ["page_size"]


@pytest.mark.parametrize("name", list(LISTS))
def test_a_page_that_is_not_a_number_is_a_400(as_viewer, orders, name):
    url, query = LISTS[name]

    response = as_viewer.get(url, {**query, "page": "abc"})

    assert response.status_code == 400
    assert list(error_of(response)["details"]["fields"]) == ["page"]


def test_a_page_size_over_500_is_500(as_viewer, orders):
    response = as_viewer.get("/api/v1/topics/", {"page_size": 501})

    assert response.status_code == 200
