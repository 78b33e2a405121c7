"""Login backends: a paused name is refused, and a name logs in in any spelling ("ADMIN",
"ＡＤＭＩＮ" and "𝐚𝐝𝐦𝐢𝐧" log in as "admin"; console/accounts/usernames.py says when two names
are the same)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import HttpRequest

from console.accounts import login_delay
from console.accounts.usernames import stored_name


class PausedNameBackend:
    """Refuses a login whose name is paused (console/accounts/login_delay.py), before any
    password is checked. Listed right after django-axes' backend: like a locked-out login,
    the refusal is not counted as a failure (``axes_locked_out``), and the AxesMiddleware
    answers it through ``AXES_LOCKOUT_CALLABLE``, which renders the pause."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None or username is None:
            return None
        pause = login_delay.paused_login(request, username)
        if pause is None:
            return None
        request.axes_locked_out = True
        request.login_pause = pause
        raise PermissionDenied(f"Logging in as {pause.username} is paused.")


def session_user(user_id: Any) -> Any:
    """The user of a session, with their ``SecondFactor`` row in the same query (the second
    factor's rule reads it on every request: console/accounts/totp.py); None when gone."""
    users = get_user_model()._default_manager.select_related("second_factor")
    try:
        return users.get(pk=user_id)
    except ObjectDoesNotExist:
        return None


class SameNameBackend(ModelBackend):
    """Django's ModelBackend, given the stored spelling of the name typed; a session's user
    is read with its second-factor state."""

    def get_user(self, user_id: Any) -> Any:
        user = session_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    async def aget_user(self, user_id: Any) -> Any:
        return await sync_to_async(self.get_user)(user_id)

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username is not None:
            username = stored_name(username) or username
        return super().authenticate(request, username=username, password=password, **kwargs)
