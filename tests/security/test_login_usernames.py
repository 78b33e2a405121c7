"""Usernames are unique whatever their case or Unicode form (issue 32, defect 4: a
full-width or mathematical-letter name such as "ＡＤＭＩＮ" or "𝐚𝐝𝐦𝐢𝐧" made a twin of "admin"
or answered 500). Names are compared by their NFKC casefold, the database refuses a case
twin, and a login finds the user by that form."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client

pytestmark = pytest.mark.django_db

USERS = "/accounts/users/"
LOGIN = "/accounts/login/"


def named(name: str) -> list[str]:
    return list(get_user_model().objects.values_list("username", flat=True).filter(username=name))


@pytest.fixture
def boss(django_user_model, password):
    return django_user_model.objects.create_user(username="admin", password=password)


@pytest.mark.parametrize("twin", ["ＡＤＭＩＮ", "𝐚𝐝𝐦𝐢𝐧", "Admin", "ADMIN"])
def test_a_twin_of_an_existing_name_is_a_form_error_on_the_users_page(as_admin, boss, twin):
    response = as_admin.post(USERS, {"username": twin, "role": "viewer"})

    assert response.status_code == 200
    errors = response.context["form"].errors["username"]
    assert errors == [f"A user named admin already exists ({twin} is the same name)."]
    assert get_user_model().objects.count() == 2  # ada and admin


def test_names_differing_by_a_case_fold_are_twins(as_admin, django_user_model):
    django_user_model.objects.create_user(username="straße", password="x")

    response = as_admin.post(USERS, {"username": "STRASSE", "role": "viewer"})

    assert response.status_code == 200
    assert "straße already exists" in html.unescape(response.content.decode())
    assert not named("STRASSE")


def test_a_new_name_is_stored_in_its_nfkc_form(as_admin):
    response = as_admin.post(USERS, {"username": "ｎｅｗｂｉｅ", "role": "viewer"})

    assert response.status_code == 200
    assert named("newbie")


def test_the_database_refuses_a_case_twin(boss, django_user_model):
    with pytest.raises(IntegrityError), transaction.atomic():
        django_user_model.objects.create_user(username="ADMIN", password="x")


@pytest.mark.parametrize("typed", ["admin", "ADMIN", "ＡＤＭＩＮ", "𝐚𝐝𝐦𝐢𝐧"])
def test_a_login_finds_the_user_by_the_normalised_name(boss, password, typed):
    client = Client()

    response = client.post(LOGIN, {"username": typed, "password": password})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(boss.pk)


def test_createsuperuser_refuses_a_twin_with_a_sentence(boss):
    with pytest.raises(CommandError, match="admin already exists"):
        call_command("createsuperuser", username="ＡＤＭＩＮ", email="a@x.test", interactive=False)

    assert get_user_model().objects.count() == 1


def test_django_admin_rename_to_a_twin_is_a_form_error(admin_client, django_user_model):
    # admin_client is logged in as pytest-django's superuser "admin".
    other = django_user_model.objects.create_user(username="other", password="x")
    page = admin_client.get(f"/admin/auth/user/{other.pk}/change/")
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update(
        username="ＡＤＭＩＮ",
        date_joined_0=other.date_joined.strftime("%Y-%m-%d"),
        date_joined_1=other.date_joined.strftime("%H:%M:%S"),
    )
    data.pop("groups", None)
    data.pop("user_permissions", None)
    data.pop("date_joined", None)
    data.pop("last_login", None)

    response = admin_client.post(f"/admin/auth/user/{other.pk}/change/", data)

    assert response.status_code == 200
    assert "admin already exists" in html.unescape(response.content.decode())
    assert named("other")


def test_django_admin_add_of_a_twin_is_a_form_error(admin_client):
    response = admin_client.post(
        "/admin/auth/user/add/",
        {
            "username": "𝐀𝐃𝐌𝐈𝐍",
            "password1": "a-long-pass-9876",
            "password2": "a-long-pass-9876",
            "usable_password": "true",
        },
    )

    assert response.status_code == 200
    assert get_user_model().objects.filter(username__iexact="admin").count() == 1


def test_a_twin_created_meanwhile_is_a_form_error_not_a_500(as_admin, boss, monkeypatch):
    # As if another admin created "admin" between the form's check and the insert.
    monkeypatch.setattr("console.accounts.forms.validate_unique_name", lambda name: None)

    response = as_admin.post(USERS, {"username": "ADMIN", "role": "viewer"})

    assert response.status_code == 200
    assert "was created meanwhile" in html.unescape(response.content.decode())
    assert get_user_model().objects.count() == 2
