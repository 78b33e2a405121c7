"""Every 429 the console and the API answer says when to retry (issue 32, defect 5: a
locked-out login was answered 429 with no Retry-After). The login lockout, the pause per
name and the password-change limit have their own tests; here, the API's rate limit, over
a full window and at its edge (more requests counted than allowed: DRF then has no wait)."""

from __future__ import annotations

import pytest
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

pytestmark = pytest.mark.django_db

URL = "/api/v1/topics/"


@pytest.fixture(autouse=True)
def fresh_rate_counts(monkeypatch):
    """The rate limit counts in a cache of its own here: other tests' requests by a user
    with the same id are not counted."""
    counts = LocMemCache("test-retry-after", {})
    counts.clear()
    monkeypatch.setattr(UserRateThrottle, "cache", counts)


@pytest.fixture
def api_viewer(viewer) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def test_the_api_rate_limit_answers_429_with_retry_after(api_viewer, store, monkeypatch):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "2/min"})
    for _ in range(2):
        assert api_viewer.get(URL).status_code == 200

    refused = api_viewer.get(URL)

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["details"]["retry_after_s"] >= 1


def test_a_429_with_more_requests_counted_than_allowed_still_has_retry_after(
    api_viewer, store, monkeypatch
):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "2/min"})
    for _ in range(2):
        api_viewer.get(URL)
    # Requests that raced past the check are in the history too: DRF's wait() is then None.
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "1/min"})

    refused = api_viewer.get(URL)

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
