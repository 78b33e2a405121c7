"""``{% row_url %}`` (console/core/templatetags/url_tags.py) answers what ``{% url %}``
answers, kept once reversed."""

from __future__ import annotations

import pytest
from django.template import engines
from django.test import RequestFactory
from django.urls import NoReverseMatch, set_script_prefix

BOTH = (
    "{% load url_tags %}{% for name in names %}"
    "{% url view name %} {% row_url view name %}\n{% endfor %}"
)
NAMES = ["orders", "%RETRY%billing", "%DLQ%billing", "a.b-c_d", "x" * 127, "ünïcode", "a b&c"]


def rendered(view: str, names: list[str]) -> list[list[str]]:
    template = engines["django"].from_string(BOTH)
    text = template.render({"view": view, "names": names}, RequestFactory().get("/"))
    return [line.split(" ") for line in text.splitlines()]


@pytest.mark.parametrize("view", ["topics:detail", "groups:detail"])
def test_row_url_is_the_url_tags_answer(view):
    for by_url, by_row_url in rendered(view, NAMES):
        assert by_row_url == by_url


def test_row_url_follows_the_script_prefix():
    rendered("topics:detail", ["orders"])
    set_script_prefix("/console/")
    try:
        [(by_url, by_row_url)] = rendered("topics:detail", ["orders"])
    finally:
        set_script_prefix("/")

    assert by_row_url == by_url == "/console/topics/orders/"


def test_row_url_of_a_name_no_url_takes_raises_as_the_url_tag_does():
    template = engines["django"].from_string("{% load url_tags %}{% row_url 'topics:detail' '' %}")

    with pytest.raises(NoReverseMatch):
        template.render({}, RequestFactory().get("/"))


@pytest.mark.parametrize("view", ["logout", "account", "password_change"])
def test_row_url_of_a_view_without_arguments_is_the_url_tags_answer(view):
    source = f"{{% load url_tags %}}{{% url '{view}' %}} {{% row_url '{view}' %}}"
    text = engines["django"].from_string(source).render({}, RequestFactory().get("/"))

    by_url, by_row_url = text.split(" ")
    assert by_row_url == by_url
