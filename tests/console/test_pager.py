"""The one pager (console/core/templatetags/pager_tags.py, templates/_pager.html)."""

from __future__ import annotations

import html
import re

from django.core.paginator import Paginator
from django.template import Context, Template
from django.test import RequestFactory

from console.messages.search import KeyPage


def render(snippet: str, url: str = "/list/?q=orders&page=2", **values) -> str:
    request = RequestFactory().get(url)
    template = Template("{% load pager_tags %}" + snippet)
    return template.render(Context({"request": request, **values}))


def links(text: str) -> list[tuple[str, str]]:
    return [
        (html.unescape(href), word)
        for href, word in re.findall(r'<a href="([^"]*)"[^>]*>([^<]*)</a>', text)
    ]


def test_a_middle_page_links_every_way_keeping_the_query():
    page = Paginator(range(100), 10).page(2)

    text = render("{% pager page %}", page=page)

    assert links(text) == [
        ("?q=orders&page=1", "First"),
        ("?q=orders&page=1", "Previous"),
        ("?q=orders&page=3", "Next"),
        ("?q=orders&page=10", "Last"),
    ]
    assert "Page 2 of 10" in text
    assert 'rel="prev"' in text and 'rel="next"' in text


def test_one_page_renders_nothing():
    page = Paginator(range(5), 10).page(1)

    assert "<nav" not in render("{% pager page %}", page=page)


def test_a_second_table_pages_with_its_own_parameter_and_anchor():
    page = Paginator(range(100), 10).page(1)

    text = render(
        '{% pager page param="streams_page" label="Pages of streams" anchor="streams" %}',
        page=page,
    )

    assert links(text) == [
        ("?q=orders&page=2&streams_page=2#streams", "Next"),
        ("?q=orders&page=2&streams_page=10#streams", "Last"),
    ]
    assert 'aria-label="Pages of streams"' in text


def test_keep_false_carries_only_the_named_values():
    page = Paginator(range(100), 10).page(3)

    text = render('{% pager page keep=False topic="orders" ends=False %}', page=page)

    assert links(text) == [("?topic=orders&page=2", "Previous"), ("?topic=orders&page=4", "Next")]


def test_a_key_search_page_without_a_count_says_no_total_and_no_last():
    text = render(
        '{% pager page previous="Newer" next="Older" %}', page=KeyPage(number=2, more=True)
    )

    assert links(text) == [("?q=orders&page=1", "Newer"), ("?q=orders&page=3", "Older")]
    assert "Page 2<" in text.replace("\n", "")
