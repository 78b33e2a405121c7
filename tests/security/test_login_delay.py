"""Progressive delay per user name (issue 32, defect 5): a guesser spread over many
addresses never trips a (name, address) lockout, so past the free failures every further
wrong password for the name, from any address, pauses that name's logins for twice as long
(429 with Retry-After). A browser that logged in as that user before is not paused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.db.models import F
from django.test import Client

from console.accounts.login_delay import pause_for

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def try_login(username: str, password: str, address: str, client: Client | None = None):
    client = client or Client()
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def spread_failures(username: str, count: int, first: int = 0) -> None:
    for number in range(first, first + count):
        assert try_login(username, "wrong", f"198.51.100.{number}").status_code == 200


def let_the_pause_pass(seconds: int) -> None:
    """Move every failure back by ``seconds`` (still within the cool-off)."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(seconds=seconds))


def test_failures_from_many_addresses_pause_the_name(viewer, settings):
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)

    paused = try_login(viewer.username, "wrong", "192.0.2.50")

    assert paused.status_code == 429
    assert int(paused["Retry-After"]) >= 1
    assert b"Logging in as vera is slowed" in paused.content


def test_each_further_failure_pauses_the_name_longer(viewer, settings):
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)
    pauses = []
    for number in range(3):
        pauses.append(int(try_login(viewer.username, "wrong", "192.0.2.50")["Retry-After"]))
        let_the_pause_pass(pauses[-1])
        spread_failures(viewer.username, 1, first=100 + number)

    assert pauses[0] < pauses[1] < pauses[2]


def test_the_pause_is_capped(settings):
    settings.TIDEMARK_LOGIN_DELAY_MAX_SECONDS = 30

    assert pause_for(settings.TIDEMARK_LOGIN_FREE_FAILURES + 1000) == timedelta(seconds=30)


def test_a_paused_attempt_is_not_counted_and_not_judged(viewer, password, settings):
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)
    before = sum(AccessAttempt.objects.values_list("failures_since_start", flat=True))

    assert try_login(viewer.username, password, "192.0.2.50").status_code == 429

    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == before


def test_other_names_are_not_paused(viewer, operator, password, settings):
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)

    assert try_login(operator.username, password, "192.0.2.50").status_code == 302


def test_the_pause_counts_the_name_in_every_spelling(viewer, settings):
    spellings = ["vera", "VERA", "ｖｅｒａ", "Vera", "𝐯𝐞𝐫𝐚"]
    for number in range(settings.TIDEMARK_LOGIN_FREE_FAILURES):
        try_login(spellings[number % len(spellings)], "wrong", f"198.51.100.{number}")

    assert try_login("vera", "wrong", "192.0.2.50").status_code == 429


def test_a_browser_that_logged_in_before_is_not_paused(viewer, password, settings):
    browser = Client()
    assert try_login(viewer.username, password, "192.0.2.8", browser).status_code == 302
    browser.post("/accounts/logout/")
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)
    assert try_login(viewer.username, password, "192.0.2.9").status_code == 429

    assert try_login(viewer.username, password, "192.0.2.8", browser).status_code == 302


def test_a_known_browser_of_another_user_is_still_paused(viewer, operator, password, settings):
    browser = Client()
    assert try_login(operator.username, password, "192.0.2.8", browser).status_code == 302
    browser.post("/accounts/logout/")
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)

    assert try_login(viewer.username, password, "192.0.2.8", browser).status_code == 429


def test_the_django_admin_login_is_the_consoles_and_paused_too(viewer, settings):
    spread_failures(viewer.username, settings.TIDEMARK_LOGIN_FREE_FAILURES)

    sent = Client().post(
        "/admin/login/",
        {"username": viewer.username, "password": "wrong"},
        REMOTE_ADDR="192.0.2.50",
    )
    assert sent.status_code == 302
    assert sent["Location"] == "/accounts/login/?next=/admin/"
    paused = try_login(viewer.username, "wrong", "192.0.2.50")

    assert paused.status_code == 429
    assert int(paused["Retry-After"]) >= 1
