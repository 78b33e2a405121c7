"""Template context for the layout: the user's role and the navigation."""

from django.http import HttpRequest

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
)


def roles(request: HttpRequest) -> dict:
    """`user_role` ("viewer", "operator", "admin" or None), `can_operate` and `can_admin`.

    Templates hide action buttons with them: ``{% if can_operate %}<button>…{% endif %}``.
    The views still check the role on POST; hiding a button is not the protection.
    """
    role = request_role(request)
    return {
        "user_role": role,
        "can_operate": role_includes(role, OPERATOR),
        "can_admin": role_includes(role, ADMIN),
    }


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
