"""A table row's link: ``{% row_url 'topics:detail' topic.name %}`` is ``{% url %}``'s
answer, reversed once per process for each view name and arguments.

Django's ``reverse`` costs tens of microseconds (namespaces, the pattern check, quoting):
on a list page of 50 rows it was the row's dearest part. The links of a list's rows name
the same topics and groups request after request, so the answer is kept (least recently
used first out, ``CACHED`` of them) under everything it depends on: the URL conf and the
script prefix of the request, the current app ``{% url %}`` would pass, the view name and
the arguments. Only for arguments that are strings or numbers (hashable); the same URL as
``{% url %}`` by construction (tests/console/pages/test_row_url.py holds them equal).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse

register = template.Library()

#: How many URLs a process keeps (a few hundred kilobytes).
CACHED = 8192


@lru_cache(maxsize=CACHED)
def _reversed(
    urlconf: Any, prefix: str, current_app: str | None, viewname: str, args: tuple
) -> str:
    # ``prefix`` is part of the key only: reverse reads the same script prefix itself.
    return reverse(viewname, urlconf=urlconf, args=args, current_app=current_app)


def _current_app(context: template.Context) -> str | None:
    """The current app ``{% url %}`` reverses with (django.template.defaulttags.URLNode)."""
    request = getattr(context, "request", None)
    try:
        return request.current_app
    except AttributeError:
        try:
            return request.resolver_match.namespace
        except AttributeError:
            return None


@register.simple_tag(takes_context=True)
def row_url(context: template.Context, viewname: str, *args: str | int) -> str:
    """``{% url viewname *args %}``, kept once reversed."""
    return _reversed(get_urlconf(), get_script_prefix(), _current_app(context), viewname, args)


def row_url_function(context: template.Context):
    """``row_url`` for a Jinja2 row template rendered inside `context`: ``row_url(viewname,
    *args)``, the same answer as the tag's."""
    urlconf, prefix, current_app = get_urlconf(), get_script_prefix(), _current_app(context)

    def row_url(viewname: str, *args: str | int) -> str:
        return _reversed(urlconf, prefix, current_app, viewname, args)

    return row_url
