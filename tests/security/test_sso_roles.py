"""Single sign-on's decisions without the provider (issue 32, item 9): which role a user's
groups give, what a returning user's groups change, the role map's setting and the
start-up checks of the configuration. The full flow is test_single_sign_on.py."""

from __future__ import annotations

import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from console.accounts import sso
from console.accounts.models import SsoIdentity
from console.accounts.roles import role_of
from console.audit.models import AuditEntry
from console.core.checks import single_sign_on
from console.env import env_mapping
from tests.security.test_production_settings import run, strong_key

ISSUER = "https://idp.example/o"
ROLE_MAP = {"tidemark-admins": "admin", "sre": "operator", "developers": "viewer"}


@pytest.mark.parametrize(
    ("groups", "role"),
    [
        (["developers"], "viewer"),
        (["developers", "sre"], "operator"),
        (["sre", "tidemark-admins", "staff"], "admin"),
        (["staff", "contractors"], None),
        ([], None),
    ],
)
def test_the_strongest_mapped_group_gives_the_role(groups, role):
    assert sso.role_for_groups(groups, ROLE_MAP) == role


def claims(groups: list[str], name: str = "sam", subject: str = "s-1") -> dict:
    return {"iss": ISSUER, "sub": subject, "preferred_username": name, "groups": groups}


@pytest.fixture
def mapped(settings):
    settings.TIDEMARK_SSO_ROLE_MAP = ROLE_MAP
    return settings


def request():
    return RequestFactory().get("/accounts/sso/callback/")


@pytest.mark.django_db
def test_a_returning_user_gets_the_role_their_groups_give_now(mapped):
    first = sso.sign_in(request(), claims(["developers"]))

    again = sso.sign_in(request(), claims(["sre"]))

    assert again.pk == first.pk
    assert role_of(again) == "operator"
    change = AuditEntry.objects.filter(action="user.role").latest("pk")
    assert (change.before, change.after) == ({"role": "viewer"}, {"role": "operator"})


@pytest.mark.django_db
def test_a_returning_user_in_no_mapped_group_is_refused_and_loses_the_role(mapped):
    user = sso.sign_in(request(), claims(["developers"]))
    asked = request()

    assert sso.sign_in(asked, claims(["contractors"])) is None

    assert "none of the user's groups" in asked.sso_refusal.reason
    assert role_of(type(user).objects.get(pk=user.pk)) is None


@pytest.mark.django_db
def test_a_deactivated_user_is_refused_with_the_reason(mapped):
    user = sso.sign_in(request(), claims(["developers"]))
    user.is_active = False
    user.save()
    asked = request()

    assert sso.sign_in(asked, claims(["developers"])) is None
    assert "deactivated" in asked.sso_refusal.reason


@pytest.mark.django_db
def test_the_same_name_from_another_subject_is_not_the_same_user(mapped):
    sso.sign_in(request(), claims(["developers"], subject="s-1"))
    asked = request()

    assert sso.sign_in(asked, claims(["tidemark-admins"], subject="s-2")) is None
    assert "already has a user named sam" in asked.sso_refusal.reason
    assert SsoIdentity.objects.count() == 1


def test_the_role_map_is_read_as_name_value_pairs():
    text = "tidemark-admins=admin, sre=operator,,team=a=viewer"

    assert env_mapping("MAP", {"MAP": text}) == {
        "tidemark-admins": "admin",
        "sre": "operator",
        "team=a": "viewer",
    }


def test_a_role_map_item_without_a_role_is_refused_with_a_sentence():
    with pytest.raises(ImproperlyConfigured, match="'developers' is not a name=value pair"):
        env_mapping("TIDEMARK_SSO_ROLE_MAP", {"TIDEMARK_SSO_ROLE_MAP": "sre=operator,developers"})


def configure(settings, **overrides) -> None:
    settings.OIDC_RP_CLIENT_ID = "tidemark"
    settings.OIDC_RP_CLIENT_SECRET = "s3cret"
    for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
        setattr(settings, f"OIDC_OP_{name}_ENDPOINT", f"https://idp.example/o/{name.lower()}/")
    settings.TIDEMARK_SSO_ISSUER = ISSUER
    settings.TIDEMARK_SSO_ROLE_MAP = ROLE_MAP
    for name, value in overrides.items():
        setattr(settings, name, value)


def test_no_check_speaks_while_single_sign_on_is_off(settings):
    settings.OIDC_RP_CLIENT_ID = ""

    assert single_sign_on(None) == []


def test_a_complete_configuration_passes_the_checks(settings):
    configure(settings)

    assert single_sign_on(None) == []


def test_a_missing_endpoint_is_an_error_naming_it(settings):
    configure(settings, OIDC_OP_JWKS_ENDPOINT="")

    found = single_sign_on(None)

    assert [item.id for item in found] == ["tidemark.E002"]
    assert "OIDC_OP_JWKS_ENDPOINT is empty" in found[0].msg


def test_a_group_mapped_to_no_role_is_an_error(settings):
    configure(settings, TIDEMARK_SSO_ROLE_MAP={"sre": "superhero"})

    found = single_sign_on(None)

    assert [item.id for item in found] == ["tidemark.E003"]
    assert "'superhero', which is not a role" in found[0].msg


def test_an_empty_role_map_warns_that_nobody_gets_in(settings):
    configure(settings, TIDEMARK_SSO_ROLE_MAP={})

    assert [item.id for item in single_sign_on(None)] == ["tidemark.W002"]


def test_check_deploy_stays_clean_with_single_sign_on_configured():
    result = run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        DEBUG="false",
        SECRET_KEY=strong_key(),
        OIDC_RP_CLIENT_ID="tidemark",
        OIDC_RP_CLIENT_SECRET="s3cret",
        OIDC_OP_AUTHORIZATION_ENDPOINT="https://idp.example/o/authorize/",
        OIDC_OP_TOKEN_ENDPOINT="https://idp.example/o/token/",
        OIDC_OP_USER_ENDPOINT="https://idp.example/o/userinfo/",
        OIDC_OP_JWKS_ENDPOINT="https://idp.example/o/.well-known/jwks.json",
        TIDEMARK_SSO_ISSUER=ISSUER,
        TIDEMARK_SSO_ROLE_MAP="tidemark-admins=admin,developers=viewer",
    )

    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.django_db
def test_a_name_longer_than_the_console_allows_is_refused(mapped):
    asked = request()

    assert sso.sign_in(asked, claims(["developers"], name="x" * 200)) is None
    assert "longer than 150" in asked.sso_refusal.reason


@pytest.mark.django_db
def test_a_session_single_sign_on_opened_is_read_after_it_is_turned_off(mapped, client, store):
    user = sso.sign_in(request(), claims(["developers"]))
    client.force_login(user, backend="console.accounts.sso.SsoBackend")
    mapped.OIDC_RP_CLIENT_ID = ""

    assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_an_admin_cannot_give_a_single_sign_on_user_a_password(mapped, as_admin):
    user = sso.sign_in(request(), claims(["developers"]))

    response = as_admin.post(f"/accounts/users/{user.pk}/", {"action": "reset_password"})

    assert response.status_code == 302
    assert not type(user).objects.get(pk=user.pk).has_usable_password()
    assert 'Reset password<span class="tm-visually-hidden"> of sam' not in (
        as_admin.get("/accounts/users/").content.decode()
    )


@pytest.mark.django_db
def test_a_provider_that_answers_with_an_error_gets_the_page_naming_it(settings, client):
    configure(settings)

    response = client.get("/accounts/sso/callback/?error=access_denied&state=x")

    assert response.status_code == 403
    assert "did not sign you in: <code>access_denied</code>" in response.content.decode()
