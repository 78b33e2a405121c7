"""Login backends: a paused name is refused, and a name logs in in any spelling ("ADMIN",
"ＡＤＭＩＮ" and "𝐚𝐝𝐦𝐢𝐧" log in as "admin"; console/accounts/usernames.py says when two names
are the same)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
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


class SameNameBackend(ModelBackend):
    """Django's ModelBackend, given the stored spelling of the name typed."""

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
