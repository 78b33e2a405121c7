"""Console pages carrying message data are never stored by browsers or proxies (issue 32,
case 6), as the API's answers are not: Cache-Control no-store on each, and not on a page
without message data."""

from __future__ import annotations

import pytest

from storeadapter.engine import dlq_topic

pytestmark = pytest.mark.django_db


def message_pages(world: dict) -> list[str]:
    message = world["message_id"]
    return [
        f"/messages/{message}/",
        f"/messages/{message}/body",
        "/messages/export/?topic=orders&queue=0",
        "/messages/?mode=range&topic=orders&queue=0",
        "/streams/?topic=accounts&stream=account-1",
        "/groups/billing/dlq/",
        "/topics/orders/",
    ]


def test_every_page_carrying_message_data_says_no_store(as_viewer, world, store):
    store.create_topic(dlq_topic("billing"), 1)
    for url in message_pages(world):
        response = as_viewer.get(url)

        assert response.status_code == 200, url
        assert "no-store" in response.get("Cache-Control", ""), url


def test_a_page_without_message_data_keeps_its_caching(as_viewer, world):
    response = as_viewer.get("/alerts/")

    assert "no-store" not in response.get("Cache-Control", "")


def test_the_api_and_the_message_pages_say_no_store_from_one_middleware(settings):
    no_store = [path for path in settings.MIDDLEWARE if "NoStore" in path]

    assert no_store == ["console.api.middleware.NoStoreMiddleware"]
