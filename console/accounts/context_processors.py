"""Template context for the layout: the user's role and the navigation."""

from django.http import HttpRequest

from console.accounts.roles import ADMIN, OPERATOR, request_role, role_includes

#: The console's sections, in nav order: (label, URL).
NAV_ITEMS: tuple[tuple[str, str], ...] = (
    ("Dashboard", "/"),
    ("Topics", "/topics/"),
    ("Groups", "/groups/"),
    ("Messages", "/messages/"),
    ("Storage", "/storage/"),
    ("Audit", "/audit/"),
    ("Tasks", "/tasks/"),
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
    items = []
    for label, url in NAV_ITEMS:
        current = path == url if url == "/" else path.startswith(url)
        items.append({"label": label, "url": url, "current": current})
    return {"nav_items": items}
