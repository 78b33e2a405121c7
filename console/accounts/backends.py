"""Logging in by name in any spelling: "ADMIN", "ＡＤＭＩＮ" and "𝐚𝐝𝐦𝐢𝐧" log in as "admin"
(console/accounts/usernames.py says when two names are the same)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from console.accounts.usernames import stored_name


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
