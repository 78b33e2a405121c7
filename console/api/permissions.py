"""The console's roles, applied to API views."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from console.accounts.roles import ADMIN, SAFE_METHODS, VIEWER, role_includes, role_of


class RolePermission(BasePermission):
    """Reads need viewer; changes need the view's ``change_role`` (admin by default).

    A view may name a role per method in ``method_roles`` ({"POST": "operator"}).
    Anonymous requests get 401, users without the role 403, and a read-only token anything
    but a read 403.
    """

    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        method = request.method.upper()
        if getattr(request.auth, "read_only", False) and method not in SAFE_METHODS:
            self.message = "This token is read-only: it may only read."
            return False
        roles = getattr(view, "method_roles", {})
        if method in roles:
            needed = roles[method]
        elif method in SAFE_METHODS:
            needed = VIEWER
        else:
            needed = getattr(view, "change_role", ADMIN)
        held = role_of(request.user)
        if not role_includes(held, needed):
            self.message = f"This needs the {needed} role; yours is {held or 'none'}."
            return False
        return True
