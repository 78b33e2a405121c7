"""Single sign-on with OpenID Connect (mozilla-django-oidc), beside local passwords.

On when ``OIDC_RP_CLIENT_ID`` is set. The login page then links to ``/accounts/sso/start/``,
which sends the browser to the provider (authorization code with PKCE, state and nonce);
the provider sends it back to ``/accounts/sso/callback/``, where `SsoBackend` exchanges the
code, checks the ID token (signature from the provider's JWKS, audience, issuer, nonce),
reads the user's claims and decides:

1. The role is `role_for_groups` of the groups claim (``TIDEMARK_SSO_GROUPS_CLAIM``) under
   ``TIDEMARK_SSO_ROLE_MAP``; the provider decides it at every login, so a role changed on
   the users page lasts until that user's next single sign-on.
2. No mapped group: refused with a page saying so; a user made by an earlier sign-on loses
   their role (their API tokens with it).
3. The console user is the one linked to the provider's (issuer, subject) (`SsoIdentity`);
   the first sign-on makes one named by ``TIDEMARK_SSO_USERNAME_CLAIM``, with no usable
   password. A name a local account already has is refused, never taken over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from console.accounts.backends import session_user
from console.accounts.models import SsoIdentity
from console.accounts.roles import ROLES, role_of
from console.accounts.usernames import stored_name
from console.accounts.users import set_role
from console.audit.log import record

#: The settings single sign-on needs once OIDC_RP_CLIENT_ID is set.
REQUIRED_SETTINGS = (
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "TIDEMARK_SSO_ISSUER",
)


def enabled() -> bool:
    """Whether single sign-on is configured (OIDC_RP_CLIENT_ID is set)."""
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def role_for_groups(groups: Iterable[str], role_map: Mapping[str, str]) -> str | None:
    """The console role (a role name) the provider's ``groups`` give under ``role_map``
    (group name -> role name): the strongest mapped one, None when no group is mapped."""
    mapped = {role_map[group] for group in groups if group in role_map}
    return next((role for role in reversed(ROLES) if role in mapped), None)


def groups_in(claims: Mapping[str, Any]) -> list[str]:
    """The groups claim as a list of names (a single name is one group; absent: none)."""
    value = claims.get(settings.TIDEMARK_SSO_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [str(group) for group in value]
    return []


@dataclass(frozen=True)
class Refusal:
    """Why a sign-on that the provider accepted does not open a console session."""

    username: str
    reason: str
    groups: tuple[str, ...] = ()


def _refuse(request: HttpRequest, refusal: Refusal) -> None:
    request.sso_refusal = refusal  # type: ignore[attr-defined]
    record(
        None,
        "login.sso_refused",
        f"single sign-on of {refusal.username or 'an unnamed user'}",
        detail=refusal.reason,
    )


def sign_in(request: HttpRequest, claims: Mapping[str, Any]) -> Any | None:
    """The console user for verified ``claims`` (ID token and userinfo), their role set from
    the groups; None when refused (``request.sso_refusal`` says why)."""
    issuer = str(claims.get("iss") or "")
    subject = str(claims.get("sub") or "")
    name = str(claims.get(settings.TIDEMARK_SSO_USERNAME_CLAIM) or "").strip()
    groups = groups_in(claims)
    role = role_for_groups(groups, settings.TIDEMARK_SSO_ROLE_MAP)
    link = SsoIdentity.objects.filter(issuer=issuer, subject=subject).select_related("user")
    identity = link.first()
    if identity is not None and not identity.user.is_active:
        _refuse(
            request,
            Refusal(
                name,
                f"the console user {identity.user.get_username()} "
                "is deactivated; an admin can activate it",
            ),
        )
        return None
    if role is None:
        if identity is not None:
            _change_role(identity.user, None, groups)
        _refuse(
            request,
            Refusal(name, "none of the user's groups is mapped to a console role", tuple(groups)),
        )
        return None
    if identity is None:
        return _first_sign_in(request, issuer, subject, name, role, claims)
    _change_role(identity.user, role, groups)
    return identity.user


def _change_role(user: Any, role: str | None, groups: list[str]) -> None:
    """Give ``user`` the role the provider's groups map to (audited when it changes)."""
    before = role_of(user)
    if before == role:
        return
    with transaction.atomic():
        set_role(user, role)
        record(
            None,
            "user.role",
            f"user {user.get_username()}",
            {"role": before},
            {"role": role},
            detail=f"single sign-on with groups: {', '.join(groups) or 'none'}",
        )


def _first_sign_in(
    request: HttpRequest, issuer: str, subject: str, name: str, role: str, claims: Mapping
) -> Any | None:
    if not name:
        _refuse(
            request,
            Refusal("", f"the provider sent no {settings.TIDEMARK_SSO_USERNAME_CLAIM} claim"),
        )
        return None
    model = get_user_model()
    longest = model._meta.get_field(model.USERNAME_FIELD).max_length
    if len(name) > longest:
        _refuse(request, Refusal(name[:longest], f"the user name is longer than {longest}"))
        return None
    if stored_name(name) is not None:
        _refuse(
            request,
            Refusal(
                name,
                f"the console already has a user named {stored_name(name)} "
                "that did not sign in through the provider",
            ),
        )
        return None
    try:
        return _create(model, issuer, subject, name, role, claims)
    except IntegrityError:
        # The same identity (or name) signed in twice at once: the other one made the user.
        _refuse(request, Refusal(name, "the same user was signing in twice at once; try again"))
        return None


def _create(model: Any, issuer: str, subject: str, name: str, role: str, claims: Mapping) -> Any:
    with transaction.atomic():
        user = model._default_manager.create_user(
            username=model.normalize_username(name), email=str(claims.get("email") or "")
        )
        SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        set_role(user, role)
        record(
            None,
            "user.create",
            f"user {user.get_username()}",
            after={"username": user.get_username(), "role": role, "active": True},
            detail=f"first single sign-on, from {issuer}",
        )
    return user


class SsoBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend: it answers nothing while single sign-on is off, checks
    the ID token's audience and issuer too, and leaves users and roles to `sign_in`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Sessions it opened are still read (get_user) after single sign-on is turned off.
        self.UserModel = get_user_model()
        if enabled():
            super().__init__(*args, **kwargs)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if request is None or not enabled() or "code_verifier" not in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as error:
            _refuse(request, Refusal("", f"the provider did not answer as expected ({error})"))
        except SuspiciousOperation as error:
            _refuse(request, Refusal("", f"the provider's answer was refused: {error}"))
        return None

    def verify_token(self, token: str, **kwargs: Any) -> dict:
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token was issued to another client.")
        if payload.get("iss") != settings.TIDEMARK_SSO_ISSUER:
            raise SuspiciousOperation(
                f"The ID token's issuer {payload.get('iss')!r} is not TIDEMARK_SSO_ISSUER."
            )
        return payload

    def get_user(self, user_id: Any) -> Any:
        """A session's user, read with its second-factor state (as SameNameBackend's)."""
        return session_user(user_id)

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> Any:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("The userinfo answer is about another subject.")
        return sign_in(self.request, {**userinfo, "iss": payload["iss"]})
