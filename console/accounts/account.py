"""/accounts/account/: the logged-in user's own account: how they sign in, their role, and
the optional TOTP of a local account (set up, confirm, turn off; console/accounts/totp.py).

The secret is shown once, on the answer to the POST that made it (never cached); a wrong
confirmation code drops it and the set-up starts again with a new one. Turning TOTP off
needs the current password, and wrong ones count as on the password-change form
(console/accounts/password_change_limit.py). Each change is audited.
"""

from __future__ import annotations

from base64 import b32encode

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.accounts import password_change_limit, totp
from console.accounts.roles import request_role
from console.audit.log import record
from console.core.post_only import post_only


def _account_url() -> str:
    return reverse("account")


def _target(request: HttpRequest) -> str:
    return f"user {request.user.get_username()}"


@require_http_methods(["GET", "HEAD"])
def account_page(request: HttpRequest) -> HttpResponse:
    """Who you are, how you sign in, and two-factor for a local account."""
    user = request.user
    identity = getattr(user, "sso_identity", None)
    device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    return render(
        request,
        "accounts/account.html",
        {
            "role": request_role(request),
            "identity": identity,
            "local": totp.is_local(user),
            "device": device,
            "provider": settings.TIDEMARK_SSO_PROVIDER_NAME,
        },
    )


def _refuse_non_local(request: HttpRequest) -> HttpResponse | None:
    if totp.is_local(request.user):
        return None
    messages.error(
        request,
        "Your account signs in through the identity provider: two-factor is set there, "
        "not here. Nothing was changed.",
    )
    return redirect(_account_url())


@post_only(_account_url)
def totp_setup(request: HttpRequest) -> HttpResponse:
    """A new secret for this user, shown once with the form that confirms it."""
    refused = _refuse_non_local(request)
    if refused is not None:
        return refused
    if totp.has_totp(request.user):
        messages.info(request, "Two-factor is on already; turn it off first to set up a new app.")
        return redirect(_account_url())
    device = totp.start_enrolment(request.user)
    response = render(
        request,
        "accounts/totp_setup.html",
        {
            "qr": totp.qr_svg(device.config_url),
            "secret": b32encode(device.bin_key).decode(),
            "form": totp.CodeForm(),
        },
    )
    add_never_cache_headers(response)
    return response


@post_only(_account_url)
def totp_confirm(request: HttpRequest) -> HttpResponse:
    """A code from the new app turns two-factor on; a wrong one drops the secret."""
    refused = _refuse_non_local(request)
    if refused is not None:
        return refused
    device = totp.confirm_enrolment(request, request.user, request.POST.get("code", ""))
    if device is None:
        messages.error(
            request,
            "That code did not match the secret shown, so two-factor is still off and that "
            "secret is dropped. Set it up again to get a new one.",
        )
        return redirect(_account_url())
    record(
        request.user,
        "user.totp.enrol",
        _target(request),
        {"totp": False},
        {"totp": True},
        link=_account_url(),
    )
    messages.success(request, "Two-factor is on: every login now asks for a code from your app.")
    return redirect(_account_url())


@post_only(_account_url)
def totp_remove(request: HttpRequest) -> HttpResponse:
    """Turn two-factor off; needs the current password (wrong ones are limited)."""
    user = request.user
    seconds = password_change_limit.seconds_refused(user.pk)
    if seconds:
        response = render(
            request,
            "registration/password_change_refused.html",
            {"seconds": seconds, "limit": settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT},
            status=429,
        )
        response["Retry-After"] = str(seconds)
        return response
    if not user.check_password(request.POST.get("password", "")):
        password_change_limit.note_failure(user.pk)
        messages.error(request, "That is not your current password; two-factor is still on.")
        return redirect(_account_url())
    password_change_limit.clear(user.pk)
    if totp.remove_devices(user):
        record(
            user,
            "user.totp.remove",
            _target(request),
            {"totp": True},
            {"totp": False},
            detail="turned off by the user",
            link=_account_url(),
        )
    messages.success(request, "Two-factor is off: logins ask for your password only.")
    return redirect(_account_url())
