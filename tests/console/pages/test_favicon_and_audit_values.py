"""Issue 30, case 9: /favicon.ico was a 404 on every page; the audit log showed "null → 1"
and offsets without thousands separators."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from console.audit.log import record

pytestmark = pytest.mark.django_db


def test_favicon_ico_sends_browsers_to_the_consoles_icon_without_a_login():
    from django.contrib.staticfiles import finders
    from django.templatetags.static import static

    response = Client().get("/favicon.ico")

    assert (response.status_code, response["Location"]) == (301, static("favicon.svg"))
    assert finders.find("favicon.svg") is not None


def test_every_page_names_its_icon(as_viewer, store):
    content = as_viewer.get("/topics/").content.decode()

    assert 'rel="icon"' in content


def test_an_offset_never_committed_shows_as_none_not_null(as_viewer, operator):
    record(operator, "offset.commit", "group g on t queue 0", {"offset": None}, {"offset": 1})

    content = html.unescape(as_viewer.get("/audit/").content.decode())

    assert "null" not in content
    assert "<code>none</code> → <code>1</code>" in content


def test_big_numbers_have_thousands_separators(as_viewer, operator):
    record(operator, "offset.commit", "group g on t queue 0", {"offset": 1}, {"offset": 1234567})

    content = html.unescape(as_viewer.get("/audit/").content.decode())

    assert "<code>1,234,567</code>" in content
