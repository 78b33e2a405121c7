"""/accounts/users/: the users, their roles; admins create, change and deactivate them.

Every page here needs the admin role, for reading too. Changes are POSTs: creating a user
to the list, the other actions to ``/accounts/users/<id>/`` with an ``action`` field. Each
change writes an audit row with the user's role and active flag before and after; passwords
are never written to it.

Passwords are generated (``secrets.token_urlsafe``), stored hashed, and shown once on the
response to the POST that made them: the page is not cached and the password cannot be
shown again, only replaced by a new one.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.accounts import lockouts, totp
from console.accounts.forms import UserCreateForm, UserRoleForm
from console.accounts.models import SsoIdentity
from console.accounts.roles import ADMIN, ROLES, ensure_role_groups, role_of
from console.audit.log import record
from console.core.post_only import post_only

#: Bytes of randomness in a generated password (``token_urlsafe(12)``: 16 characters).
PASSWORD_BYTES = 12


def generate_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


def assigned_role(user: Any) -> str | None:
    """The user's role: `role_of`, or for an inactive user the role they get back if activated."""
    if user.is_active:
        return role_of(user)
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    return next((role for role in reversed(ROLES) if role in names), None)


def _state(user: Any) -> dict[str, Any]:
    """What the audit rows keep of a user: role and active flag (never the password)."""
    return {"role": assigned_role(user), "active": user.is_active}


def _list_url() -> str:
    return reverse("user_list")


def _target(user: Any) -> str:
    return f"user {user.get_username()}"


def set_role(user: Any, role: str | None) -> None:
    """Replace the user's role groups with `role`'s group (None: no role); other groups are
    kept."""
    groups = ensure_role_groups()
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role is not None:
        user.groups.add(groups[role])


def _shown_once(request: HttpRequest, user: Any, password: str, created: bool) -> HttpResponse:
    """The page with the new password; never cached, so it is not shown again."""
    response = render(
        request,
        "accounts/user_created.html",
        {
            "new_user": user,
            "new_user_role": assigned_role(user),
            "password": password,
            "created": created,
        },
    )
    add_never_cache_headers(response)
    return response


# ---------------------------------------------------------------------------- list


@require_http_methods(["GET", "HEAD", "POST"])
def user_list(request: HttpRequest) -> HttpResponse:
    """Every user with role, state, last login and date joined; the create form."""
    if request.method == "POST":
        form = UserCreateForm(request.POST)
        if form.is_valid():
            try:
                return _create_user(request, form)
            except IntegrityError:
                # Another admin created the same name (in some spelling) meanwhile.
                form.add_error(
                    "username",
                    f"A user named {form.cleaned_data['username']} "
                    "(in some spelling) was created meanwhile; nothing was created.",
                )
    else:
        form = UserCreateForm()
    users = get_user_model()._default_manager.order_by("username")
    with_totp = set(TOTPDevice.objects.filter(confirmed=True).values_list("user_id", flat=True))
    with_sso = set(SsoIdentity.objects.values_list("user_id", flat=True))
    rows = [
        {
            "user": user,
            "role": assigned_role(user),
            "totp": user.pk in with_totp,
            "sso": user.pk in with_sso,
        }
        for user in users
    ]
    return render(
        request,
        "accounts/users.html",
        {"rows": rows, "form": form, "roles": ROLES, "lockouts": lockouts.current_lockouts()},
    )


def _create_user(request: HttpRequest, form: UserCreateForm) -> HttpResponse:
    data = form.cleaned_data
    password = generate_password()
    with transaction.atomic():
        user = get_user_model()._default_manager.create_user(
            username=data["username"], email=data["email"], password=password
        )
        set_role(user, data["role"])
        record(
            request.user,
            "user.create",
            _target(user),
            after={"username": user.get_username(), **_state(user)},
            link=_list_url(),
        )
    return _shown_once(request, user, password, created=True)


# -------------------------------------------------------------------- one user's actions

Handler = Callable[[HttpRequest, Any], HttpResponse]


@post_only(lambda user_id: _list_url())
def user_action(request: HttpRequest, user_id: int) -> HttpResponse:
    """POST ``action``: role, deactivate, activate or reset_password; then back to the list."""
    user = get_object_or_404(get_user_model(), pk=user_id)
    handler = ACTIONS.get(request.POST.get("action", ""))
    if handler is None:
        messages.error(request, "That action is not known; nothing was changed.")
        return redirect(_list_url())
    if (user.is_superuser or user.is_staff) and not request.user.is_superuser:
        # A password reset would hand over the account, and with it Django admin access.
        messages.error(
            request,
            f"{user.get_username()} is a staff or superuser account; only a superuser can "
            "change it. Nothing was changed.",
        )
        return redirect(_list_url())
    return handler(request, user)


def _is_self(request: HttpRequest, user: Any) -> bool:
    return user.pk == request.user.pk


def _change_role(request: HttpRequest, user: Any) -> HttpResponse:
    form = UserRoleForm(request.POST)
    name = user.get_username()
    if not form.is_valid():
        messages.error(
            request, f"Choose one of the roles: {', '.join(ROLES)}. Nothing was changed."
        )
        return redirect(_list_url())
    role = form.cleaned_data["role"]
    before = _state(user)
    if user.is_superuser:
        messages.error(
            request,
            f"{name} is a superuser and so an admin whatever the role; nothing was changed.",
        )
        return redirect(_list_url())
    if _is_self(request, user) and role != ADMIN:
        messages.error(request, "You cannot remove your own admin role; ask another admin.")
        return redirect(_list_url())
    if before["role"] == role:
        messages.info(request, f"{name} is already {role}; nothing was changed.")
        return redirect(_list_url())
    with transaction.atomic():
        set_role(user, role)
        record(request.user, "user.role", _target(user), before, _state(user), link=_list_url())
    messages.success(request, f"{name} is now {role}.")
    return redirect(_list_url())


def _set_active(active: bool) -> Handler:
    verb = "activate" if active else "deactivate"

    def handler(request: HttpRequest, user: Any) -> HttpResponse:
        name = user.get_username()
        if not active and _is_self(request, user):
            messages.error(request, "You cannot deactivate yourself; ask another admin.")
            return redirect(_list_url())
        if user.is_active == active:
            state = "active" if active else "inactive"
            messages.info(request, f"{name} is already {state}; nothing was changed.")
            return redirect(_list_url())
        before = _state(user)
        with transaction.atomic():
            user.is_active = active
            user.save(update_fields=["is_active"])
            record(
                request.user, f"user.{verb}", _target(user), before, _state(user), link=_list_url()
            )
        if active:
            messages.success(request, f"Activated {name}: they can log in again.")
        else:
            messages.success(request, f"Deactivated {name}: they can no longer log in.")
        return redirect(_list_url())

    return handler


def _reset_password(request: HttpRequest, user: Any) -> HttpResponse:
    if SsoIdentity.objects.filter(user=user).exists():
        messages.error(
            request,
            f"{user.get_username()} signs in through single sign-on and has no password here; "
            "nothing was changed.",
        )
        return redirect(_list_url())
    password = generate_password()
    state = _state(user)
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        record(
            request.user,
            "user.password",
            _target(user),
            state,
            state,
            detail="password reset to a new generated one",
            link=_list_url(),
        )
    if _is_self(request, user):
        update_session_auth_hash(request, user)  # stay logged in
    return _shown_once(request, user, password, created=False)


def _reset_totp(request: HttpRequest, user: Any) -> HttpResponse:
    """Remove the user's TOTP (a lost phone): their next login asks for the password only."""
    name = user.get_username()
    with transaction.atomic():
        removed = totp.remove_devices(user)
        if removed:
            record(
                request.user,
                "user.totp.reset",
                _target(user),
                {"totp": True},
                {"totp": False},
                detail="two-factor reset by an admin",
                link=_list_url(),
            )
    if removed:
        messages.success(request, f"Two-factor of {name} is off; they can set it up again.")
    else:
        messages.info(request, f"{name} has no two-factor set up; nothing was changed.")
    return redirect(_list_url())


#: POST ``action`` → handler; every one needs the admin role (checked for the whole view).
ACTIONS: dict[str, Handler] = {
    "role": _change_role,
    "deactivate": _set_active(False),
    "activate": _set_active(True),
    "reset_password": _reset_password,
    "reset_totp": _reset_totp,
}


# ------------------------------------------------------------------------ lockouts


@post_only(lambda: _list_url())
def user_unlock(request: HttpRequest) -> HttpResponse:
    """POST ``username`` and ``address``: lift that pair's login lockout (audited)."""
    username = request.POST.get("username", "")
    address = request.POST.get("address", "")
    lifted = lockouts.unlock(username, address)
    if lifted is None:
        messages.info(
            request, f"Logging in as {username} from {address} was not paused; nothing to lift."
        )
        return redirect(_list_url())
    record(
        request.user,
        "login.unlock",
        lifted.describe(),
        before={"failures": lifted.failures, "paused_until": lifted.until},
        after={"failures": 0, "paused_until": None},
        link=_list_url(),
    )
    messages.success(request, f"{username} can log in from {address} again.")
    return redirect(_list_url())
