import re
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group
from django.core.management import call_command

from console.accounts.roles import ensure_role_groups, has_role, role_of
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

TEST_URLS = "tests.console.role_test_urls"


def test_migration_creates_the_three_role_groups():
    names = set(Group.objects.values_list("name", flat=True))

    assert {"viewer", "operator", "admin"} <= names


def test_role_of_viewer(viewer):
    assert role_of(viewer) == "viewer"


def test_role_of_operator(operator):
    assert role_of(operator) == "operator"


def test_role_of_admin(admin):
    assert role_of(admin) == "admin"


def test_role_of_user_in_no_group_is_none(nobody):
    assert role_of(nobody) is None


def test_role_of_anonymous_is_none():
    assert role_of(AnonymousUser()) is None


def test_role_of_superuser_is_admin_without_any_group(admin_user):
    assert role_of(admin_user) == "admin"


def test_role_of_user_in_several_groups_is_the_strongest(viewer):
    viewer.groups.add(ensure_role_groups()["operator"])

    assert role_of(viewer) == "operator"


def test_role_of_inactive_user_is_none(admin):
    admin.is_active = False

    assert role_of(admin) is None


def test_operator_has_viewer_role_but_not_admin(operator):
    assert has_role(operator, "viewer")
    assert has_role(operator, "operator")
    assert not has_role(operator, "admin")


def test_admin_has_every_role(admin):
    assert all(has_role(admin, role) for role in ("viewer", "operator", "admin"))


def test_user_in_no_group_has_no_role(nobody):
    assert not has_role(nobody, "viewer")


def test_has_role_rejects_unknown_role_name(admin):
    with pytest.raises(ValueError, match="unknown role"):
        has_role(admin, "root")


# The change decorator, on a view that writes an audit row when it runs.


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_lets_viewer_get(as_viewer):
    response = as_viewer.get("/t/operator-changes/")

    assert response.status_code == 200


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_answers_viewer_post_with_403_and_changes_nothing(as_viewer):
    response = as_viewer.post("/t/operator-changes/")

    assert response.status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_403_page_names_the_role_needed(as_viewer):
    response = as_viewer.post("/t/operator-changes/")

    assert "403.html" in [t.name for t in response.templates]
    assert response.context["required_role"] == "operator"
    assert b"operator" in response.content


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_lets_operator_post(as_operator):
    response = as_operator.post("/t/operator-changes/")

    assert response.status_code == 200
    assert AuditEntry.objects.get().action == "test.touch"


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_lets_admin_post(as_admin):
    assert as_admin.post("/t/operator-changes/").status_code == 200


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_refuses_other_unsafe_methods_to_viewer(as_viewer):
    response = as_viewer.delete("/t/operator-changes/")

    assert response.status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_refuses_get_to_user_without_role(as_nobody):
    assert as_nobody.get("/t/operator-changes/").status_code == 403


@pytest.mark.urls(TEST_URLS)
def test_change_decorator_sends_anonymous_post_to_login(client):
    response = client.post("/t/operator-changes/")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/t/operator-changes/"
    assert not AuditEntry.objects.exists()


@pytest.mark.urls(TEST_URLS)
def test_require_role_refuses_even_get_without_the_role(as_operator):
    assert as_operator.get("/t/admin-only/").status_code == 403


@pytest.mark.urls(TEST_URLS)
def test_require_role_lets_the_role_in(as_admin):
    assert as_admin.get("/t/admin-only/").status_code == 200


@pytest.mark.urls(TEST_URLS)
def test_mixin_lets_viewer_get(as_viewer):
    assert as_viewer.get("/t/admin-changes/").status_code == 200


@pytest.mark.urls(TEST_URLS)
def test_mixin_answers_operator_post_with_403_and_changes_nothing(as_operator):
    response = as_operator.post("/t/admin-changes/")

    assert response.status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.urls(TEST_URLS)
def test_mixin_lets_admin_post(as_admin):
    assert as_admin.post("/t/admin-changes/").status_code == 200


@pytest.mark.urls(TEST_URLS)
def test_mixin_sends_anonymous_to_login_with_next(client):
    response = client.get("/t/admin-changes/?page=2")

    assert response.status_code == 302
    assert response["Location"] == f"{settings.LOGIN_URL}?next=/t/admin-changes/%3Fpage%3D2"


# Login for every page (the middleware).


@pytest.mark.urls(TEST_URLS)
def test_undecorated_page_needs_login(client):
    response = client.get("/t/flash/")

    assert response.status_code == 302
    assert response["Location"].startswith(f"{settings.LOGIN_URL}?next=")


def test_api_paths_are_left_to_the_api_auth(client):
    # The API answers 401 in JSON itself, not a redirect to the HTML login form.
    response = client.get("/api/v1/topics/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_logout_works_without_a_session(client):
    response = client.post("/accounts/logout/")

    assert response.status_code == 302
    assert response["Location"] == settings.LOGOUT_REDIRECT_URL


def test_user_without_role_can_log_out(as_nobody):
    as_nobody.post("/accounts/logout/")

    assert "_auth_user_id" not in as_nobody.session


def test_healthz_is_public_with_the_login_middleware(client):
    assert client.get("/healthz").status_code == 200


# Template context and layout.


def test_context_hides_actions_from_viewer(as_viewer):
    context = as_viewer.get("/audit/").context

    assert context["user_role"] == "viewer"
    assert context["can_operate"] is False
    assert context["can_admin"] is False


def test_context_lets_operator_operate_but_not_administer(as_operator):
    context = as_operator.get("/audit/").context

    assert (context["can_operate"], context["can_admin"]) == (True, False)


def test_context_lets_admin_do_everything(as_admin):
    context = as_admin.get("/audit/").context

    assert (context["can_operate"], context["can_admin"]) == (True, True)


def test_layout_shows_nav_user_and_role(as_operator):
    html = as_operator.get("/audit/").content.decode()

    for url in ("/topics/", "/groups/", "/messages/", "/storage/", "/audit/"):
        assert f'href="{url}"' in html
    assert 'href="/accounts/users/"' not in html  # for admins only
    assert '<a href="/audit/" aria-current="page">Audit</a>' in html
    assert "otto" in html
    assert '<span class="tm-role">operator</span>' in html


def test_layout_has_skip_link_and_logout_post_form(as_viewer):
    html = as_viewer.get("/audit/").content.decode()

    assert '<a class="tm-skip" href="#main">' in html
    assert 'id="main"' in html
    assert 'method="post" action="/accounts/logout/"' in html


def test_layout_loads_no_cdn(as_viewer):
    html = as_viewer.get("/audit/").content.decode()

    # Off-site assets only: the page's random CSRF token may spell "cdn" by chance.
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)


#: The scripts a page loads only when it has what they work on; the layout's own (confirm.js
#: for any form's data-confirm, theme.js for dark mode, shortcuts.js for the keys) are on
#: every page.
LAYOUT_SCRIPTS = {"/static/js/confirm.js", "/static/js/theme.js", "/static/js/shortcuts.js"}
SCRIPT_USES = {
    "/static/js/htmx.min.js": re.compile(r"\shx-(?:get|post|put|patch|delete)="),
    "/static/js/charts.js": re.compile(r"\sdata-chart-url="),
    "/static/js/tail.js": re.compile(r"\sdata-tail-url="),
}


def test_every_page_loads_only_the_scripts_it_uses(as_admin, store):
    from console.accounts.context_processors import NAV_ITEMS

    for _, url, _ in NAV_ITEMS:
        html = as_admin.get(url).content.decode()

        loaded = set(re.findall(r'<script src="([^"]+)"', html))
        assert loaded - set(SCRIPT_USES) == LAYOUT_SCRIPTS, url
        for script, use in SCRIPT_USES.items():
            assert (script in loaded) == bool(use.search(html)), (url, script)


def test_the_tasks_page_loads_vendored_htmx_for_its_workers_line(as_viewer):
    html = as_viewer.get("/tasks/").content.decode()

    assert 'hx-get="/tasks/workers/"' in html
    assert '<script src="/static/js/htmx.min.js" defer>' in html


def test_vendored_htmx_file_exists():
    htmx = settings.BASE_DIR / "static" / "js" / "htmx.min.js"

    assert htmx.read_text(encoding="utf-8").startswith("var htmx=")


@pytest.mark.urls(TEST_URLS)
def test_layout_renders_flash_messages(as_viewer):
    html = as_viewer.get("/t/flash/").content.decode()

    assert "tm-message-success" in html
    assert "Topic orders created." in html


def test_demo_admin_is_put_in_the_admin_group(django_user_model):
    call_command("ensure_demo_admin", stdout=StringIO())

    user = django_user_model.objects.get(username="admin")
    assert user.groups.filter(name="admin").exists()


def test_admins_see_the_users_page_in_the_nav(as_admin):
    assert 'href="/accounts/users/"' in as_admin.get("/audit/").content.decode()


# Scoped roles (a group with rules: console/accounts/permissions.py).


def _scoped(django_user_model, rules: list[tuple[str, str, list[str]]]):
    from console.accounts.models import RoleRule

    role = Group.objects.create(name="team-a")
    for kind, pattern, actions in rules:
        RoleRule.objects.create(role=role, kind=kind, pattern=pattern, actions=actions)
    user = django_user_model.objects.create_user(username="tess", password=None)
    user.groups.add(role)
    return user


def test_role_of_a_user_in_a_scoped_role_is_viewer(django_user_model):
    user = _scoped(django_user_model, [("topic", "a.*", ["view"])])

    assert role_of(user) == "viewer"


def test_a_group_without_rules_gives_no_role(django_user_model):
    assert role_of(_scoped(django_user_model, [])) is None


def test_a_scoped_role_allows_its_actions_on_matching_names_only(django_user_model):
    from console.accounts.permissions import permissions_of

    permissions = permissions_of(_scoped(django_user_model, [("topic", "a.*", ["view"])]))

    assert permissions.allows("topic", "a.orders", "view")
    assert not permissions.allows("topic", "a.orders", "read")
    assert not permissions.allows("topic", "b.orders", "view")
    assert not permissions.allows("group", "a.orders", "view")


@pytest.mark.urls(TEST_URLS)
def test_a_scoped_role_may_open_a_topic_page_its_rules_cover(store, django_user_model, client):
    store.create_topic("a.orders", 1)
    store.create_topic("b.orders", 1)
    client.force_login(_scoped(django_user_model, [("topic", "a.*", ["view"])]))

    assert client.get("/topics/a.orders/").status_code == 200
    assert client.get("/topics/b.orders/").status_code == 403
    assert client.get("/t/operator-changes/").status_code == 200  # a viewer's GET
    assert client.post("/t/operator-changes/").status_code == 403


def test_a_users_roles_and_their_rules_are_read_in_one_query(operator, django_assert_num_queries):
    from console.accounts.models import RoleRule
    from console.accounts.permissions import Grant, Permissions

    team = Group.objects.create(name="team")
    RoleRule.objects.create(role=team, kind="topic", pattern="ord*", actions=["view", "read"])
    RoleRule.objects.create(role=team, kind="group", pattern="billing", actions=["reset"])
    Group.objects.create(name="rule-less")
    operator.groups.add(team, Group.objects.get(name="rule-less"))

    with django_assert_num_queries(1):
        permissions = Permissions(operator)

    assert permissions.level == "operator"
    assert Grant("topic", "ord*", frozenset({"view", "read"})) in permissions.grants
    assert Grant("group", "billing", frozenset({"reset"})) in permissions.grants


def test_a_user_in_a_scoped_role_alone_is_a_viewer_of_the_console(nobody):
    from console.accounts.models import RoleRule
    from console.accounts.permissions import Permissions

    team = Group.objects.create(name="team")
    RoleRule.objects.create(role=team, kind="topic", pattern="ord*", actions=["view"])
    nobody.groups.add(team)

    permissions = Permissions(nobody)

    assert permissions.level == "viewer"
    assert not permissions.allows("topic", "other", "view")
