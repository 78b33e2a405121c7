"""The console's permissions, applied to API views: the one table of
console/accounts/permissions.py (``NEEDS``), checked after the API's own authentication."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from console.accounts.permissions import NEEDS, A, denial, level_only, need_for, reads_body
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
        view_name = match.view_name if match else None
        if view_name not in NEEDS:
            need = A  # an endpoint the table does not list: admins only
        else:
            need = need_for(view_name, method)
            if need is None:
                return True  # a method the endpoint does not take: the view answers 405
        kwargs = match.kwargs if match else {}
        # The level first, so that a body is parsed (and a bad one answered 400) only for
        # a user who may send one at all.
        refused = denial(request.user, level_only(need), kwargs)
        body = None
        if refused is None and reads_body(need):
            body = request.data  # a parse error propagates: the view would answer it too
        refused = refused or denial(request.user, need, kwargs, request.query_params, body)
        if refused is not None:
            self.message = refused.message
            return False
        return True
