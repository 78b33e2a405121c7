"""Access to one another's things: tokens, the login redirect, deactivated users, the audit
rows in the admin site."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from console.accounts.models import ApiToken
from console.audit.log import record
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins_token(admin) -> ApiToken:
    token, _ = ApiToken.issue(admin, "admin-deploy-key")
    return token


def test_a_viewer_cannot_revoke_another_users_token(as_viewer, admins_token):
    audit_rows = AuditEntry.objects.count()

    as_viewer.post(f"/accounts/tokens/{admins_token.pk}/revoke/")

    assert ApiToken.objects.filter(pk=admins_token.pk).exists()
    assert AuditEntry.objects.count() == audit_rows


def test_a_viewer_does_not_see_another_users_tokens(as_viewer, admins_token):
    content = as_viewer.get("/accounts/tokens/").content.decode()

    assert "admin-deploy-key" not in content
    assert admins_token.prefix not in content


def test_an_operator_cannot_revoke_another_users_token(as_operator, admins_token):
    as_operator.post(f"/accounts/tokens/{admins_token.pk}/revoke/")

    assert ApiToken.objects.filter(pk=admins_token.pk).exists()


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/", "/\\evil.example/", "javascript:alert(1)"],
)
def test_login_never_redirects_off_the_site(client, viewer, password, target):
    response = client.post(
        "/accounts/login/", {"username": viewer.username, "password": password, "next": target}
    )

    assert response.status_code == 302
    assert response["Location"] == "/"


def test_a_deactivated_users_token_is_refused(viewer):
    _, key = ApiToken.issue(viewer, "old laptop")
    viewer.is_active = False
    viewer.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    response = client.get("/api/v1/topics/")

    assert response.status_code == 401


def test_a_revoked_token_is_refused(viewer):
    token, key = ApiToken.issue(viewer, "leaked")
    token.delete()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    assert client.get("/api/v1/topics/").status_code == 401


def test_even_a_superuser_cannot_delete_audit_rows_in_the_admin_site(admin_client, admin_user):
    entry = record(admin_user, "test.keep", "kept")

    response = admin_client.post(f"/admin/audit/auditentry/{entry.pk}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk).exists()
