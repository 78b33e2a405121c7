"""The console's permissions, applied to API views: the one table of
console/accounts/permissions.py (``NEEDS``), checked after the API's own authentication."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.permissions import BasePermission

from console.accounts.permissions import denial, need_for
from console.accounts.roles import SAFE_METHODS


class RolePermission(BasePermission):
    """What ``NEEDS`` says the endpoint needs for the request's method: a console level, or
    an action on the topic or group the URL (or the query, or the JSON body) names.

    Anonymous requests get 401, users without it 403 with a sentence, and a read-only
    token anything but a read 403. An endpoint missing from the table needs the admin
    level (the table test lists every one).
    """

    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        method = request.method.upper()
        if getattr(request.auth, "read_only", False) and method not in SAFE_METHODS:
            self.message = "This token is read-only: it may only read."
            return False
        match = request.resolver_match
        need = need_for(match.view_name if match else None, method)
        if need is None:
            from console.accounts.permissions import A

            need = A
        try:
            body = request.data if method not in SAFE_METHODS else None
        except ParseError:
            body = None  # the view answers the bad body with its 400
        refused = denial(
            request.user,
            need,
            match.kwargs if match else {},
            request.query_params,
            body,
        )
        if refused is not None:
            self.message = refused.message
            return False
        return True
