"""/accounts/users/: admins list, create, change, deactivate users and reset passwords."""

import html

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.test import Client

from console.accounts.roles import ensure_role_groups, role_of
from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

URL = "/accounts/users/"
PASSWORD = "pat-s-old-password"


def action_url(user) -> str:
    return f"{URL}{user.pk}/"


def text(response) -> str:
    return html.unescape(response.content.decode())


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def fresh(user):
    return get_user_model().objects.get(pk=user.pk)


def shown_password(response) -> str:
    return response.context["password"]


@pytest.fixture
def pat(db, django_user_model):
    """An operator the admin manages."""
    user = django_user_model.objects.create_user(username="pat", password=PASSWORD)
    user.groups.add(ensure_role_groups()["operator"])
    return user


# Access


def test_anonymous_is_sent_to_login_with_next(client):
    response = client.get(URL)

    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/accounts/users/"


@pytest.mark.parametrize("who", ["as_nobody", "as_viewer", "as_operator"])
def test_non_admins_get_403_on_the_list(request, who):
    assert request.getfixturevalue(who).get(URL).status_code == 403


def test_admin_sees_users_with_role_state_and_dates(as_admin, pat):
    pat.is_active = False
    pat.save()

    response = as_admin.get(URL)

    assert response.status_code == 200
    rows = {row["user"].username: row for row in response.context["rows"]}
    assert rows["ada"]["role"] == "admin"
    assert rows["pat"]["role"] == "operator"
    content = text(response)
    assert "inactive" in content
    assert 'name="username"' in content
    assert f'action="{action_url(pat)}"' in content


# Create


def test_create_makes_the_user_in_the_role_group(as_admin):
    response = as_admin.post(URL, {"username": "newbie", "role": "operator", "email": ""})

    assert response.status_code == 200
    user = get_user_model().objects.get(username="newbie")
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]
    assert role_of(user) == "operator"


def test_create_shows_a_working_password_once(as_admin):
    response = as_admin.post(URL, {"username": "newbie", "role": "viewer"})

    password = shown_password(response)
    assert len(password) == 16
    assert text(response).count(password) == 1
    assert "no-store" in response["Cache-Control"]
    assert Client().login(request=HttpRequest(), username="newbie", password=password)
    assert password not in text(as_admin.get(URL))
    assert get_user_model().objects.get(username="newbie").password != password


def test_create_writes_an_audit_row_without_the_password(as_admin):
    response = as_admin.post(URL, {"username": "newbie", "role": "admin", "email": "n@x.test"})

    entry = AuditEntry.objects.get(action="user.create")
    assert entry.username == "ada"
    assert entry.target == "user newbie"
    assert entry.after == {"username": "newbie", "role": "admin", "active": True}
    assert shown_password(response) not in str(entry.__dict__)


def test_duplicate_username_is_a_form_error(as_admin, pat):
    response = as_admin.post(URL, {"username": "PAT", "role": "viewer"})

    assert response.status_code == 200
    assert response.context["form"].errors["username"] == [
        "A user named pat already exists (PAT is the same name)."
    ]
    assert get_user_model().objects.filter(username__iexact="pat").count() == 1
    assert not AuditEntry.objects.exists()


def test_invalid_username_is_a_form_error(as_admin):
    response = as_admin.post(URL, {"username": "no spaces!", "role": "viewer"})

    assert "username" in response.context["form"].errors
    assert not get_user_model().objects.filter(username="no spaces!").exists()


# Role


def test_role_change_replaces_the_role_group_and_is_audited(as_admin, pat):
    response = as_admin.post(action_url(pat), {"action": "role", "role": "viewer"})

    assert response.status_code == 302
    assert list(fresh(pat).groups.values_list("name", flat=True)) == ["viewer"]
    entry = AuditEntry.objects.get(action="user.role")
    assert (entry.before, entry.after) == (
        {"role": "operator", "active": True},
        {"role": "viewer", "active": True},
    )


def test_admin_cannot_remove_their_own_admin_role(as_admin, admin):
    response = as_admin.post(action_url(admin), {"action": "role", "role": "viewer"}, follow=True)

    assert role_of(fresh(admin)) == "admin"
    assert flashes(response) == ["You cannot remove your own admin role; ask another admin."]
    assert not AuditEntry.objects.exists()


# Deactivate, activate


def test_deactivated_user_cannot_log_in(as_admin, pat):
    as_admin.post(action_url(pat), {"action": "deactivate"})

    assert not fresh(pat).is_active
    assert not Client().login(request=HttpRequest(), username="pat", password=PASSWORD)
    entry = AuditEntry.objects.get(action="user.deactivate")
    assert (entry.before, entry.after) == (
        {"role": "operator", "active": True},
        {"role": "operator", "active": False},
    )


def test_activate_lets_the_user_log_in_again(as_admin, pat):
    pat.is_active = False
    pat.save()

    as_admin.post(action_url(pat), {"action": "activate"})

    assert Client().login(request=HttpRequest(), username="pat", password=PASSWORD)
    assert AuditEntry.objects.get(action="user.activate").after == {
        "role": "operator",
        "active": True,
    }


def test_admin_cannot_deactivate_themselves(as_admin, admin):
    response = as_admin.post(action_url(admin), {"action": "deactivate"}, follow=True)

    assert fresh(admin).is_active
    assert flashes(response) == ["You cannot deactivate yourself; ask another admin."]
    assert not AuditEntry.objects.exists()


# Password reset


def test_password_reset_shows_a_new_working_password(as_admin, pat):
    response = as_admin.post(action_url(pat), {"action": "reset_password"})

    password = shown_password(response)
    assert response.status_code == 200
    assert password in text(response)
    assert Client().login(request=HttpRequest(), username="pat", password=password)
    assert not Client().login(request=HttpRequest(), username="pat", password=PASSWORD)
    entry = AuditEntry.objects.get(action="user.password")
    assert password not in str(entry.__dict__)


def test_group_admin_cannot_reset_a_superusers_password(as_admin, admin_user):
    as_admin.post(action_url(admin_user), {"action": "reset_password"})

    assert fresh(admin_user).check_password("password")
    assert not AuditEntry.objects.exists()


# Other requests


def test_unknown_user_is_404(as_admin):
    assert as_admin.post(f"{URL}999999/", {"action": "deactivate"}).status_code == 404


@pytest.mark.parametrize("who", ["as_viewer", "as_operator"])
@pytest.mark.parametrize(
    "data",
    [
        {"action": "role", "role": "admin"},
        {"action": "deactivate"},
        {"action": "reset_password"},
    ],
)
def test_non_admin_post_is_403_and_changes_nothing(request, who, data, pat):
    response = request.getfixturevalue(who).post(action_url(pat), data)

    assert response.status_code == 403
    pat = fresh(pat)
    assert (role_of(pat), pat.is_active) == ("operator", True)
    assert pat.check_password(PASSWORD)
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("who", ["as_viewer", "as_operator"])
def test_non_admin_create_is_403_and_creates_nothing(request, who):
    response = request.getfixturevalue(who).post(URL, {"username": "sneaky", "role": "admin"})

    assert response.status_code == 403
    assert not get_user_model().objects.filter(username="sneaky").exists()
