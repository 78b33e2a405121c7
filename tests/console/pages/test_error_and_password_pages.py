"""Error pages (404, 403, 500, 400) and the password pages in the console's layout."""

import pytest
from django.conf import settings
from django.test import RequestFactory
from django.views.defaults import server_error

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db]


def test_debug_is_off_unless_set():
    assert settings.DEBUG is False


def test_an_unknown_page_is_a_404_in_the_consoles_layout(as_viewer):
    response = as_viewer.get("/no-such-page/")

    body = response.content.decode()
    assert response.status_code == 404
    assert "Page not found" in body and "/no-such-page/" in body
    assert 'class="tm-nav"' in body
    assert "URLconf" not in body and "groups/&lt;str:group&gt;" not in body


def test_a_forbidden_page_is_a_403_in_the_consoles_layout(as_viewer):
    response = as_viewer.get("/accounts/users/")

    body = response.content.decode()
    assert response.status_code == 403
    assert "Not allowed" in body and 'class="tm-nav"' in body


def test_a_server_error_is_a_500_in_the_consoles_layout():
    response = server_error(RequestFactory().get("/"))

    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in body
    assert "css/tidemark.css" in body


def test_a_bad_request_is_a_400_in_the_consoles_layout(as_admin, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 2

    response = as_admin.post("/topics/", {"a": 1, "b": 2, "c": 3})

    body = response.content.decode()
    assert response.status_code == 400
    assert "Bad request" in body and "css/tidemark.css" in body


def test_the_password_change_page_is_linked_from_the_user_menu(as_viewer):
    home = as_viewer.get("/").content.decode()

    assert 'href="/accounts/password_change/">Change password</a>' in home


def test_the_password_change_page_is_in_the_consoles_layout(as_viewer):
    body = as_viewer.get("/accounts/password_change/").content.decode()

    assert "Change your password" in body and 'class="tm-nav"' in body
    assert "/admin/" not in body


def test_changing_the_password_lands_on_a_page_in_the_consoles_layout(as_viewer):
    response = as_viewer.post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "a new long passphrase 1",
            "new_password2": "a new long passphrase 1",
        },
        follow=True,
    )

    body = response.content.decode()
    assert "Password changed" in body and "/admin/" not in body
