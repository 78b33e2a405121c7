"""A GET on a URL that only a form posts to goes back to the page the form is on (issue
30, case 7: after a preview the address bar held /groups/<g>/reset/preview/; Enter, a new
tab, or a login with ?next= there gave a blank "HTTP ERROR 405"). One decorator,
console.core.post_only, is on every POST-only console view; this test finds them all from
the URLconf, so a new POST-only view without it fails here."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from console.accounts.models import ApiToken
from console.alerts.models import AlertRule, Silence
from console.core.post_only import is_post_only

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(store, admin):
    store.create_topic("orders", 1)
    store.append("orders", b"x")
    store.commit_offset("billing", "orders", 0, 1)
    rule = AlertRule.objects.create(name="lagging", kind=AlertRule.LAG_MESSAGES, threshold=10)
    token, _ = ApiToken.issue(admin, "deploy")
    from datetime import timedelta

    from django.utils import timezone

    silence = Silence.objects.create(reason="m", ends_at=timezone.now() + timedelta(hours=1))
    return {"rule": rule.pk, "token": token.pk, "silence": silence.pk, "user": admin.pk}


def cases(world) -> list[tuple[str, str]]:
    """(a POST-only URL, the page its form is on)."""
    return [
        ("/groups/billing/reset/preview/", "/groups/billing/#reset"),
        ("/groups/billing/reset/apply/", "/groups/billing/#reset"),
        ("/groups/billing/reset/again/", "/groups/billing/#reset"),
        ("/groups/billing/delete/", "/groups/billing/#delete"),
        (f"/alerts/rules/{world['rule']}/action/", "/alerts/#rules"),
        (f"/alerts/silences/{world['silence']}/expire/", "/alerts/#silences"),
        ("/alerts/test-email/", "/alerts/#test-email"),
        (f"/accounts/tokens/{world['token']}/revoke/", "/accounts/tokens/"),
        (f"/accounts/users/{world['user']}/", "/accounts/users/"),
        ("/accounts/users/unlock/", "/accounts/users/"),
    ]


def test_a_get_on_each_post_only_url_goes_to_the_forms_page(as_admin, world):
    for url, page in cases(world):
        response = as_admin.get(url)

        assert (url, response.status_code, response["Location"]) == (url, 303, page)


def test_the_redirect_says_why(as_admin, world):
    response = as_admin.get("/groups/billing/reset/preview/", follow=True)

    assert response.status_code == 200
    flashed = [str(m) for m in response.context["messages"]]
    assert any("only a form's button" in m for m in flashed), flashed


def test_a_login_with_next_on_a_post_only_url_lands_on_the_forms_page(
    client, operator, password, world
):
    response = client.post(
        "/accounts/login/?next=/groups/billing/reset/preview/",
        {
            "username": operator.username,
            "password": password,
            "next": "/groups/billing/reset/preview/",
        },
        follow=True,
    )

    assert response.redirect_chain[-1] == ("/groups/billing/#reset", 303)
    assert response.status_code == 200


def test_other_methods_are_still_405(as_admin, world):
    assert as_admin.put("/groups/billing/reset/preview/").status_code == 405


def _views(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _views(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def test_every_post_only_console_view_uses_the_decorator():
    import inspect

    missing = []
    for route, view in _views():
        if route.startswith("api/"):
            continue
        source_view = inspect.unwrap(view)
        closure_methods = _allowed_methods(view)
        if closure_methods == {"POST"} and not is_post_only(view):
            missing.append((route, source_view.__qualname__))
    assert missing == []


def _allowed_methods(view) -> set[str] | None:
    """The methods a require_http_methods decorator in the chain allows, if any."""
    current = view
    while current is not None:
        for cell in getattr(current, "__closure__", None) or ():
            value = cell.cell_contents
            if (
                isinstance(value, (list, tuple))
                and value
                and all(isinstance(v, str) and v.isupper() for v in value)
            ):
                return set(value)
        current = getattr(current, "__wrapped__", None)
    return None
