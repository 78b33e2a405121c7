"""The sortable header links of a list page (console/core/sort_links.py): one copy of the
query string for all of them, each link what Django's ``{% querystring sort=… page=None %}``
gives."""

from __future__ import annotations

import pytest
from django.http import QueryDict
from django.template import RequestContext, Template
from django.test import RequestFactory

from console.core.sort_links import sort_links

SORTS = {"name": "-name", "kind": "kind", "size": "size", "last_write": "last_write"}
QUERIES = [
    "",
    "page=2",
    "q=1&sort=last_write&page=2",
    "kind=retry&q=a%26b%3Cc%3E&page=3&sort=name",
    "q=x&q=y&page=1&page=2&extra=%22%27",
]


def django_querystring(query: str, sort: str) -> str:
    request = RequestFactory().get("/topics/?" + query)
    template = Template("{% querystring sort=sort page=None %}")
    return template.render(RequestContext(request, {"sort": sort}, autoescape=False))


@pytest.mark.parametrize("query", QUERIES)
def test_each_link_is_what_querystring_gives(query):
    links = sort_links(QueryDict(query), SORTS)

    assert links == {column: django_querystring(query, sort) for column, sort in SORTS.items()}


def test_the_request_query_is_left_as_it_was():
    query = QueryDict("q=1&sort=kind&page=2")

    sort_links(query, SORTS)

    assert query.urlencode() == "q=1&sort=kind&page=2"
