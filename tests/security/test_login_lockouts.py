"""Lockouts lock one (user name, address) pair (issue 30, access 1: five typos for a user
that does not exist, from one address, locked the admin out behind the same NAT, and the
page blamed "this user"). The locked page names who is locked, from where, and until when,
with a Retry-After header; admins lift a lockout from the users page, and that is audited."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import pytest
from django.test import Client
from django.utils import timezone

from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
NAT = "203.0.113.7"


def try_login(username: str, password: str, address: str = NAT):
    return Client().post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def lock(username: str, settings, address: str = NAT) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        try_login(username, "wrong", address)


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_typos_for_another_name_behind_one_address_do_not_lock_out_the_admin(
    admin, password, settings
):
    lock("no-such-user", settings)

    assert try_login(admin.username, password).status_code == 302


def test_the_locked_page_names_the_user_the_address_and_when_it_ends(viewer, settings):
    lock(viewer.username, settings)

    locked = try_login(viewer.username, "anything")

    assert locked.status_code == 429
    page = text(locked)
    assert f"Logging in as {viewer.username} from {NAT} is paused" in page
    until = re.search(r"until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", page)
    assert until is not None, page
    ends = datetime.strptime(until.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    assert timezone.now() < ends <= timezone.now() + settings.AXES_COOLOFF_TIME


def test_a_lockout_answers_with_retry_after_in_seconds(viewer, settings):
    lock(viewer.username, settings)

    locked = try_login(viewer.username, "anything")

    assert locked.status_code == 429
    retry_after = int(locked["Retry-After"])
    assert 0 < retry_after <= settings.AXES_COOLOFF_TIME.total_seconds()


def test_the_users_page_lists_current_lockouts(as_admin, viewer, settings):
    lock(viewer.username, settings)

    page = text(as_admin.get("/accounts/users/"))

    assert "Paused logins" in page
    assert f"{viewer.username}" in page and NAT in page


def test_an_admin_unlocks_a_pair_and_the_user_logs_in(as_admin, viewer, password, settings):
    lock(viewer.username, settings)

    response = as_admin.post(
        "/accounts/users/unlock/", {"username": viewer.username, "address": NAT}
    )

    assert response.status_code == 302
    assert try_login(viewer.username, password).status_code == 302
    entry = AuditEntry.objects.get(action="login.unlock")
    assert entry.target == f"login of {viewer.username} from {NAT}"
    assert entry.username == "ada"


@pytest.mark.parametrize("who", ["as_viewer", "as_operator"])
def test_only_admins_unlock(request, who, viewer, settings):
    lock(viewer.username, settings)

    response = request.getfixturevalue(who).post(
        "/accounts/users/unlock/", {"username": viewer.username, "address": NAT}
    )

    assert response.status_code == 403
    assert try_login(viewer.username, "wrong").status_code == 429
