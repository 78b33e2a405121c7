"""Console roles and the checks that views use.

A role is a Django group made by this app's migration. The roles are ordered; each one
includes everything the ones before it may do:

- ``viewer`` reads every page;
- ``operator`` also sends test messages, resets offsets, freezes queues, redrives DLQ messages;
- ``admin`` also creates and deletes topics and queues, manages users, tokens and alert rules.

Superusers are admins. A logged-in user in none of the groups has no role and gets 403 on
every page that checks a role.

Console pages and API endpoints do not use the decorators below: what each URL needs
(a level, or an action on a topic or group) is one table, checked by one function
(console/accounts/permissions.py). The decorators remain for views outside that table
(the API docs page) and for tests.

Function views::

    @require_role("viewer")  # every method needs viewer
    def audit_list(request): ...


    @change_requires_role("operator")  # GET/HEAD/OPTIONS: viewer; POST and other changes: operator
    def topic_detail(request, name): ...

Class-based views::

    class TopicDetail(RoleRequiredMixin, View):
        required_role = "viewer"  # for safe methods (GET, HEAD, OPTIONS, TRACE)
        change_role = "admin"  # for unsafe ones; defaults to required_role

An anonymous visitor is sent to the login page with ``next`` set to the page asked for; a
logged-in user without the role gets ``403.html`` naming the role needed, and the view does
not run, so nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"

#: Every role, weakest first; a role includes the ones before it.
ROLES: tuple[str, ...] = (VIEWER, OPERATOR, ADMIN)

#: HTTP methods that never change anything; they need only the viewer role.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

_RANK = {role: rank for rank, role in enumerate(ROLES)}
_REQUEST_CACHE = "_tidemark_role"
#: The attribute the decorators leave on a view: the role a GET of it needs.
_READ_ROLE = "tidemark_read_role"


def _check_role_name(role: str) -> None:
    if role not in _RANK:
        raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")


def role_of(user: Any) -> str | None:
    """The user's strongest role: "viewer", "operator" or "admin", or None.

    None for anonymous and inactive users and for users in no role group. Superusers are
    "admin" whatever their groups.
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    for role in reversed(ROLES):
        if role in names:
            return role
    # A scoped role (a group with rules, console/accounts/permissions.py) sees the
    # console-wide pages as a viewer; its rules say which topics and groups.
    from console.accounts.models import RoleRule

    if RoleRule.objects.filter(role__user=user).exists():
        return VIEWER
    return None


def role_includes(held: str | None, role: str) -> bool:
    """Whether holding role `held` (None: no role) allows what `role` allows."""
    _check_role_name(role)
    return held is not None and _RANK[held] >= _RANK[role]


def has_role(user: Any, role: str) -> bool:
    """Whether `user` has `role` or a stronger one."""
    return role_includes(role_of(user), role)


def request_role(request: HttpRequest) -> str | None:
    """`role_of(request.user)`, looked up once per request."""
    if not hasattr(request, _REQUEST_CACHE):
        from console.accounts.permissions import permissions_of  # it imports this module

        user = getattr(request, "user", None)
        setattr(request, _REQUEST_CACHE, permissions_of(user).level if user else None)
    return getattr(request, _REQUEST_CACHE)


def ensure_role_groups() -> dict[str, Group]:
    """The three role groups, created if missing (the migration normally made them)."""
    return {role: Group.objects.get_or_create(name=role)[0] for role in ROLES}


def forbidden(request: HttpRequest, role: str) -> HttpResponse:
    """The 403 page saying which role is needed."""
    return render(
        request,
        "403.html",
        {"required_role": role, "current_role": request_role(request)},
        status=403,
    )


def check_role(request: HttpRequest, role: str) -> HttpResponse | None:
    """None when the request's user has `role`; otherwise the response to send instead.

    Anonymous: a redirect to the login page with ``next``; logged in without the role: 403.
    """
    _check_role_name(role)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not role_includes(request_role(request), role):
        return forbidden(request, role)
    return None


def role_for_method(method: str | None, change_role: str, read_role: str = VIEWER) -> str:
    """The role a request with `method` needs: `read_role` when safe, else `change_role`."""
    return read_role if (method or "GET").upper() in SAFE_METHODS else change_role


ViewFunc = Callable[..., HttpResponse]


def require_role(role: str) -> Callable[[ViewFunc], ViewFunc]:
    """View decorator: every request (any method) needs `role`."""
    _check_role_name(role)

    def decorator(view: ViewFunc) -> ViewFunc:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return check_role(request, role) or view(request, *args, **kwargs)

        setattr(wrapper, _READ_ROLE, role)
        return wrapper

    return decorator


def change_requires_role(role: str) -> Callable[[ViewFunc], ViewFunc]:
    """View decorator: safe methods (GET, HEAD...) need viewer; POST and other changes `role`.

    A viewer's POST is answered with 403 before the view runs, so it changes nothing.
    """
    _check_role_name(role)

    def decorator(view: ViewFunc) -> ViewFunc:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            needed = role_for_method(request.method, role)
            return check_role(request, needed) or view(request, *args, **kwargs)

        setattr(wrapper, _READ_ROLE, VIEWER)
        return wrapper

    return decorator


class RoleRequiredMixin:
    """Class-based view mixin; put it first among the bases.

    ``required_role`` is needed for safe methods (default viewer), ``change_role`` for
    unsafe ones (default: the same as ``required_role``).
    """

    required_role: str = VIEWER
    change_role: str | None = None

    def needed_role(self, request: HttpRequest) -> str:
        change = self.change_role or self.required_role
        if _RANK[change] < _RANK[self.required_role]:
            change = self.required_role
        return role_for_method(request.method, change, self.required_role)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        denied = check_role(request, self.needed_role(request))
        if denied is not None:
            return denied
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
