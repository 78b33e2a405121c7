"""Template context for the layout: the user's role and the navigation."""

from django.http import HttpRequest

from console.accounts.permissions import (
    GROUP,
    MANAGE,
    PRODUCE,
    REDRIVE,
    RESET,
    TOPIC,
    permissions_of,
)
from console.accounts.roles import ADMIN, OPERATOR, VIEWER, request_role, role_includes

#: The console's sections, in nav order: (label, URL, the role needed to see the item).
NAV_ITEMS: tuple[tuple[str, str, str], ...] = (
    ("Dashboard", "/", VIEWER),
    ("Topics", "/topics/", VIEWER),
    ("Groups", "/groups/", VIEWER),
    ("Messages", "/messages/", VIEWER),
    ("Streams", "/streams/", VIEWER),
    ("Storage", "/storage/", VIEWER),
    ("Alerts", "/alerts/", VIEWER),
    ("Tasks", "/tasks/", VIEWER),
    ("Audit", "/audit/", VIEWER),
    ("API tokens", "/accounts/tokens/", VIEWER),
    ("Users", "/accounts/users/", ADMIN),
    ("Roles", "/accounts/roles/", ADMIN),
)


#: On pages of one topic or group: (kind, URL keyword, the action ``can_operate`` stands
#: for, the one ``can_admin`` stands for).
_RESOURCE_PAGES = {
    "topics:detail": (TOPIC, "topic", PRODUCE, MANAGE),
    "groups:detail": (GROUP, "group", RESET, MANAGE),
    "groups:resets": (GROUP, "group", RESET, MANAGE),
    "groups:dlq": (GROUP, "group", REDRIVE, MANAGE),
}


def roles(request: HttpRequest) -> dict:
    """`user_role` ("viewer", "operator", "admin" or None), `can_operate` and `can_admin`.

    Templates hide action buttons with them: ``{% if can_operate %}<button>…{% endif %}``.
    On a topic's or a group's page they say what the user's rules allow on it (produce or
    reset/redrive; manage), on the topic list whether the user may create some topic.
    The permission check still runs on POST; hiding a button is not the protection.
    """
    role = request_role(request)
    can_operate = role_includes(role, OPERATOR)
    can_admin = role_includes(role, ADMIN)
    match = getattr(request, "resolver_match", None)
    view_name = match.view_name if match else ""
    user = getattr(request, "user", None)
    if view_name in _RESOURCE_PAGES and user is not None:
        kind, key, operate, manage = _RESOURCE_PAGES[view_name]
        name = match.kwargs.get(key, "")
        permissions = permissions_of(user)
        can_operate = permissions.allows(kind, name, operate)
        can_admin = permissions.allows(kind, name, manage)
    elif view_name == "topics:list" and user is not None:
        can_admin = permissions_of(user).allows_some(TOPIC, MANAGE)
    return {"user_role": role, "can_operate": can_operate, "can_admin": can_admin}


def navigation(request: HttpRequest) -> dict:
    """`nav_items`: dicts with label, url and current (the section the page belongs to)."""
    path = request.path
    role = request_role(request)
    items = []
    for label, url, needed in NAV_ITEMS:
        if not role_includes(role, needed):
            continue
        current = path == url if url == "/" else path.startswith(url)
        items.append({"label": label, "url": url, "current": current})
    return {"nav_items": items}
