"""Pages send a Content-Security-Policy that lets only the console's own scripts run; API
answers are never stored (issue 21)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


@pytest.mark.parametrize("path", ["/", "/topics/", "/accounts/login/", "/api/docs/"])
def test_pages_allow_only_the_consoles_own_scripts(as_viewer, store, path):
    response = as_viewer.get(path)

    assert response.status_code == 200
    policy = directives(response)
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]


@pytest.mark.parametrize("path", ["/", "/topics/", "/api/docs/"])
def test_pages_hold_no_inline_script(as_viewer, store, path):
    html = as_viewer.get(path).content.decode()

    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    assert scripts
    assert all("src=" in attrs and not body.strip() for attrs, body in scripts), scripts
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers either


@pytest.mark.parametrize(
    "path", ["/api/v1/topics/", "/api/v1/storage/", "/api/v1/nowhere/", "/api/schema/"]
)
def test_api_answers_are_never_stored(as_viewer, store, path):
    response = as_viewer.get(path)

    assert "no-store" in response["Cache-Control"]


def test_an_api_error_is_never_stored_either(client, db):
    response = client.get("/api/v1/topics/")

    assert response.status_code == 401
    assert "no-store" in response["Cache-Control"]
