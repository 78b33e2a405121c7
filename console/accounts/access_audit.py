"""Audit rows for access: logins, failed logins, lockouts and password changes.

Failures and lockouts are signals (``connect``, called by ``AccountsConfig.ready``); a
login and a password change are written by the pages that make them (``passwords``), so a
session opened without a login page (tests' ``force_login``) writes nothing. Passwords are
never written, only that one was changed and by whom. Unlocks are audited where an admin
lifts them (``users.user_unlock``).
"""

from __future__ import annotations

from typing import Any

from axes.signals import user_locked_out
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest

from console.accounts import lockouts
from console.accounts.throttle import client_ip
from console.audit.log import record


def _address(request: HttpRequest | None) -> str:
    if request is None:
        return "an unknown address"
    return getattr(request, "axes_ip_address", None) or client_ip(request) or "an unknown address"


def _tried_name(credentials: dict | None) -> str:
    return str((credentials or {}).get("username") or "")


def logged_in(request: HttpRequest, user: Any, how: str = "") -> None:
    """Called by the login pages once the session is open; ``how`` says by what means when
    it was not a password alone ("with a TOTP code", "through <provider>")."""
    detail = f"from {_address(request)}" + (f" {how}" if how else "")
    record(user, "login", f"user {user.get_username()}", detail=detail)


def login_failed(
    sender: Any, credentials: dict | None = None, request: HttpRequest | None = None, **kwargs: Any
) -> None:
    if getattr(request, "sso_refusal", None) is not None:
        return  # a single sign-on refused for a reason: audited with it (console/accounts/sso.py)
    if credentials is not None and "code_verifier" in credentials:
        record(None, "login.failure", f"single sign-on from {_address(request)}")
        return
    record(None, "login.failure", f"login of {_tried_name(credentials)} from {_address(request)}")


def locked_out(
    sender: Any, request: HttpRequest | None = None, username: str | None = None, **kwargs: Any
) -> None:
    """One row when a pair's lockout starts; axes signals again for every refused try."""
    if getattr(request, "axes_failures_since_start", None) != lockouts.failure_limit():
        return
    address = _address(request)
    lockout = lockouts.lockout_of(username or "", address)
    after: dict[str, Any] = {"failures": lockouts.failure_limit()}
    after["paused_until"] = lockout.until if lockout is not None else None
    record(None, "login.lockout", f"login of {username or ''} from {address}", after=after)


def password_changed(request: HttpRequest, user: Any, how: str) -> None:
    """Called by the password views once the new password is saved."""
    record(
        request.user if request.user.is_authenticated else user,
        "user.password",
        f"user {user.get_username()}",
        detail=how,
    )


def connect() -> None:
    user_login_failed.connect(login_failed, dispatch_uid="tidemark-audit-login-failure")
    user_locked_out.connect(locked_out, dispatch_uid="tidemark-audit-lockout")
