"""/accounts/tokens/: personal API tokens, shown once, stored hashed, revocable, audited."""

import pytest
from rest_framework.test import APIClient

from console.accounts.models import ApiToken, hash_key
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

TOKENS = "/accounts/tokens/"


def create(client, name="deploy script"):
    return client.post(TOKENS, {"name": name})


def test_anonymous_is_sent_to_login(client):
    response = client.get(TOKENS)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_user_without_a_role_gets_403(as_nobody):
    assert as_nobody.get(TOKENS).status_code == 403
    assert create(as_nobody).status_code == 403
    assert not ApiToken.objects.exists()


def test_a_viewer_creates_a_token_shown_once_and_stored_hashed(as_viewer, viewer):
    response = create(as_viewer)

    assert response.status_code == 200
    key = response.context["key"]
    token = ApiToken.objects.get(user=viewer)
    assert token.key_hash == hash_key(key)
    assert key not in token.key_hash
    assert "no-cache" in response["Cache-Control"]
    assert key not in as_viewer.get(TOKENS).content.decode()


def test_the_new_token_authenticates_the_api_with_the_users_role(as_viewer):
    key = create(as_viewer).context["key"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    assert api.get("/api/v1/audit/").status_code == 200
    assert api.post("/api/v1/topics/", {"name": "t", "queues": 1}, format="json").status_code == 403


def test_creating_a_token_is_audited_without_the_key(as_viewer):
    key = create(as_viewer).context["key"]

    entry = AuditEntry.objects.get(action="token.create")
    assert entry.username == "vera"
    assert key not in str(entry.after)


def test_a_token_needs_a_name(as_viewer):
    response = create(as_viewer, name="")

    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_revoking_a_token_stops_it_at_once(as_viewer, viewer):
    key = create(as_viewer).context["key"]
    token = ApiToken.objects.get(user=viewer)

    response = as_viewer.post(f"{TOKENS}{token.pk}/revoke/")

    assert response.status_code == 302
    assert not ApiToken.objects.exists()
    assert AuditEntry.objects.filter(action="token.revoke").count() == 1
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/audit/").status_code == 401


def test_a_user_cannot_see_or_revoke_anothers_token(as_viewer, operator):
    token, _ = ApiToken.issue(operator, "theirs")

    assert "theirs" not in as_viewer.get(TOKENS).content.decode()
    as_viewer.post(f"{TOKENS}{token.pk}/revoke/")

    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_an_admin_sees_and_revokes_everyones_tokens(as_admin, operator):
    token, _ = ApiToken.issue(operator, "theirs")

    page = as_admin.get(TOKENS).content.decode()
    as_admin.post(f"{TOKENS}{token.pk}/revoke/")

    assert "theirs" in page and "otto" in page
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_revoking_needs_a_post(as_viewer, viewer):
    token, _ = ApiToken.issue(viewer, "mine")

    response = as_viewer.get(f"{TOKENS}{token.pk}/revoke/")
    assert (response.status_code, response["Location"]) == (303, TOKENS)
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_deactivated_users_token_is_refused(viewer):
    _, key = ApiToken.issue(viewer, "mine")
    viewer.is_active = False
    viewer.save()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    assert api.get("/api/v1/audit/").status_code == 401
