"""/accounts/tokens/ shows each token's state (issue 30, access 3: a token stopped by a
password change still looked live): active, expired (when), or revoked and why."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.accounts.models import ApiToken

pytestmark = pytest.mark.django_db

TOKENS = "/accounts/tokens/"


def state_cell(client, token: ApiToken) -> str:
    page = html.unescape(client.get(TOKENS).content.decode())
    row = re.search(rf'<tr id="token-{token.pk}">(.*?)</tr>', page, re.S)
    assert row is not None, page
    cell = re.search(r'<td class="tm-token-state">(.*?)</td>', row.group(1), re.S)
    assert cell is not None, row.group(1)
    return " ".join(re.sub(r"<[^>]+>", "", cell.group(1)).split())


def test_a_new_token_is_active(as_viewer, viewer):
    token, _ = ApiToken.issue(viewer, "deploy")

    assert state_cell(as_viewer, token) == "active"


def test_a_token_made_before_a_password_change_shows_revoked_and_why(as_viewer, viewer):
    token, _ = ApiToken.issue(viewer, "deploy")
    viewer.set_password("a-brand-new-passphrase-9")
    viewer.save()
    as_viewer.force_login(viewer)

    assert state_cell(as_viewer, token) == (
        "revoked: vera's password was changed after it was made"
    )


def test_a_token_past_its_expiry_shows_expired_and_when(as_viewer, viewer):
    token, _ = ApiToken.issue(viewer, "deploy", expires_at=timezone.now() - timedelta(hours=1))

    assert state_cell(as_viewer, token) == (f"expired at {token.expires_at:%Y-%m-%d %H:%M:%S} UTC")


def test_an_admin_sees_a_deactivated_users_token_as_revoked(as_admin, viewer):
    token, _ = ApiToken.issue(viewer, "deploy")
    viewer.is_active = False
    viewer.save()

    assert state_cell(as_admin, token) == "revoked: vera is deactivated"
