"""Optional TOTP (django-otp) for local accounts: enrolment, the login's second step, and the
rule that a session of a user with TOTP carries a verified code.

1. A user enrols on /accounts/account/ (console/accounts/account.py): an unconfirmed
   device is made and its secret shown once, as a QR code and as text; a right code from
   the app confirms it (audited ``user.totp.enrol``).
2. From then on a right password on the login page opens no session: the browser is sent
   to /accounts/login/code/ (`login_code`), which asks for the code within
   ``TIDEMARK_TOTP_STEP_SECONDS``. A wrong code is a failed login for that name (Django's
   ``user_login_failed``): the (name, address) lockout and the pause per name
   (console/accounts/lockouts.py, login_delay.py) count it and refuse further codes
   exactly as they refuse passwords, 429 with Retry-After.
3. `SecondFactorMiddleware` (django-otp's OTPMiddleware with the rule) logs out any
   session whose user has a confirmed device but gave no code in it (Django admin's own
   login form, a session from before enrolment).
   It reads the user's ``SecondFactor`` row, which the login backends load with the user
   (console/accounts/backends.py): no query a request. That row follows the devices:
   `device_saved` and `device_deleted` recompute it whenever a device is saved or deleted,
   wherever (this module, the users page, Django's admin, the shell), so a device set up
   or removed in another session counts on the next request of every session.
4. Admins reset a user's TOTP on the users page (``user.totp.reset``). API tokens are not
   affected by any of it: they are their own proof.

Users who sign in through the identity provider have no local password; their second
factor is the provider's.
"""

from __future__ import annotations

import functools
import re
import time
from typing import Any

import segno
from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.signals import user_login_failed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods
from django_otp import login as otp_login
from django_otp import match_token
from django_otp.middleware import OTPMiddleware
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.accounts import lockouts, login_delay
from console.accounts.access_audit import logged_in
from console.accounts.models import SecondFactor

#: The session key of a login waiting for its code.
PENDING_KEY = "tidemark_totp_pending"
#: What a code looks like once spaces are taken out.
CODE_PATTERN = re.compile(r"^\d{6,8}$")


def is_local(user: Any) -> bool:
    """Whether the user logs in with a password here (not through single sign-on)."""
    return user.has_usable_password() and not hasattr(user, "sso_identity")


def has_totp(user: Any) -> bool:
    """Whether logging in as ``user`` asks for a TOTP code: the user's ``SecondFactor`` row
    (no query when it was loaded with the user; one otherwise)."""
    if not user.is_authenticated:
        return False
    try:
        return user.second_factor.totp
    except SecondFactor.DoesNotExist:
        return False


# ------------------------------------------------------------ the state the rule reads


def refresh_second_factor(user_id: int, create: bool) -> None:
    """Set the user's ``SecondFactor`` row from their devices (the one place that decides
    it). ``create``: make the row when there is none (not while the user is being deleted:
    the row and the devices go with the user)."""
    totp = TOTPDevice.objects.filter(user_id=user_id, confirmed=True).exists()
    if create:
        SecondFactor.objects.update_or_create(user_id=user_id, defaults={"totp": totp})
    else:
        SecondFactor.objects.filter(user_id=user_id).update(totp=totp)


@receiver(post_save, sender=TOTPDevice, dispatch_uid="tidemark_totp_device_saved")
def device_saved(sender: Any, instance: TOTPDevice, update_fields: Any = None, **kwargs: Any):
    if update_fields is not None and not {"confirmed", "user"} & set(update_fields):
        return  # a code checked (drift, last use, throttling): the device set is the same
    refresh_second_factor(instance.user_id, create=True)


@receiver(post_delete, sender=TOTPDevice, dispatch_uid="tidemark_totp_device_deleted")
def device_deleted(sender: Any, instance: TOTPDevice, **kwargs: Any) -> None:
    refresh_second_factor(instance.user_id, create=False)


def qr_svg(url: str) -> str:
    """The QR code of ``url`` as inline SVG markup (no image request, no script)."""
    return segno.make(url, error="m").svg_inline(scale=4, border=2, dark="#000", light="#fff")


# ------------------------------------------------------------------ the login's second step


def ask_for_code(request: HttpRequest, user: Any, next_url: str) -> HttpResponse:
    """After a right password: remember the login in the session, send the browser to the
    code page."""
    request.session[PENDING_KEY] = {
        "user": user.pk,
        "backend": user.backend,
        "at": time.time(),
        "next": next_url,
    }
    return redirect("login_code")


def _pending(request: HttpRequest) -> tuple[Any, dict] | None:
    pending = request.session.get(PENDING_KEY)
    if not isinstance(pending, dict):
        return None
    if time.time() - float(pending.get("at", 0)) > settings.TIDEMARK_TOTP_STEP_SECONDS:
        del request.session[PENDING_KEY]
        return None
    user = auth.get_user_model()._default_manager.filter(pk=pending.get("user")).first()
    if user is None or not user.is_active:
        return None
    return user, pending


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code from your authenticator app",
        max_length=20,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "autofocus": True}
        ),
    )

    def clean_code(self) -> str:
        return re.sub(r"\s+", "", self.cleaned_data["code"])


def _safe_next(request: HttpRequest, next_url: str) -> str:
    allowed = url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return next_url if next_url and allowed else settings.LOGIN_REDIRECT_URL


def _page(request: HttpRequest, form: CodeForm) -> HttpResponse:
    response = render(request, "registration/login_code.html", {"form": form})
    add_never_cache_headers(response)
    return response


@login_not_required
@require_http_methods(["GET", "HEAD", "POST"])
def login_code(request: HttpRequest) -> HttpResponse:
    """The code step of a login whose password was right; throttled as passwords are."""
    found = _pending(request)
    if found is None:
        seconds = settings.TIDEMARK_TOTP_STEP_SECONDS
        messages.info(
            request,
            f"Log in with your password first; its code is asked for within {seconds} seconds.",
        )
        return redirect("login")
    user, pending = found
    if request.method != "POST":
        return _page(request, CodeForm())
    name = user.get_username()
    credentials = {"username": name, "totp": True}
    pause = login_delay.paused_login(request, name)
    if pause is not None:
        return login_delay.paused_response(request, pause)
    if not AxesProxyHandler.is_allowed(request, credentials):
        return lockouts.lockout_response(request, credentials=credentials)
    form = CodeForm(request.POST)
    device = None
    if form.is_valid() and CODE_PATTERN.match(form.cleaned_data["code"]):
        device = match_token(user, form.cleaned_data["code"])
    if device is None:
        # Counted as a wrong password for the name (lockout and pause alike); the lockout
        # answer replaces this page when this one reaches the limit (axes' middleware).
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
        form = CodeForm(request.POST)
        form.is_valid()
        form.add_error("code", "That code is not right, or was used already. Try the next one.")
        return _page(request, form)
    del request.session[PENDING_KEY]
    auth.login(request, user, backend=pending["backend"])
    otp_login(request, device)
    logged_in(request, user, how="with a TOTP code")
    response = redirect(_safe_next(request, str(pending.get("next") or "")))
    login_delay.remember_browser(response, name)
    return response


# ------------------------------------------------------------------------ the session rule


class SecondFactorMiddleware(OTPMiddleware):
    """django-otp's OTPMiddleware (``request.user.otp_device`` and ``is_verified()``), and
    the rule: logs out a session whose user has TOTP but gave no code in it; the request
    goes on as anonymous (pages send it to the login, the API answers 401/403).

    The rule reads the user on every request, so the user is verified where it stands
    (the attributes set on the user AuthenticationMiddleware made) rather than behind
    django-otp's second lazy wrapper, which the rule would unwrap at once anyway."""

    async_capable = False

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None:
            self._verify_user_sync(request, user)
            if has_totp(user) and not user.is_verified():
                auth.logout(request)
        auser = getattr(request, "auser", None)
        if auser is not None:
            request.auser = functools.partial(self._verify_user_async_via_auser, request, auser)
        return self.get_response(request)


# ------------------------------------------------------------------------------ enrolment


def start_enrolment(user: Any) -> TOTPDevice:
    """A new unconfirmed device for ``user`` (any earlier unconfirmed one is dropped)."""
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    return TOTPDevice.objects.create(user=user, name="authenticator app", confirmed=False)


def confirm_enrolment(request: HttpRequest, user: Any, code: str) -> TOTPDevice | None:
    """Confirm the user's unconfirmed device with a code from it; the device, or None when
    the code is wrong (the unconfirmed device is dropped: enrolment starts again)."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("-id").first()
    if device is None:
        return None
    code = re.sub(r"\s+", "", code)
    if not CODE_PATTERN.match(code) or not device.verify_token(code):
        device.delete()
        return None
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
    otp_login(request, device)  # this session just proved it holds the secret
    return device


def remove_devices(user: Any) -> int:
    """Delete every TOTP device of ``user``; how many there were."""
    deleted, _ = TOTPDevice.objects.filter(user=user).delete()
    return deleted
