"""A list's rows rendered by Jinja2, e.g.
``{% render_rows "topics/_rows.jinja" page manageable=manageable %}`` (and base.html's
navigation items, ``_nav.jinja``: a loop on every page).

The ``.jinja`` template gets ``rows`` (the second argument) and the keyword arguments,
plus ``row_url`` bound to this request and ``csrf_input()`` (the page's
``{% csrf_token %}``); console/core/jinja.py says why and how it escapes. Its output is
inserted as it is (already escaped).
"""

from __future__ import annotations

from django import template
from django.template.defaulttags import CsrfTokenNode
from django.utils.safestring import SafeString, mark_safe

from console.core.jinja import environment
from console.core.templatetags.url_tags import row_url_function

register = template.Library()


@register.simple_tag(takes_context=True)
def render_rows(context: template.Context, name: str, rows, **values) -> SafeString:
    rows_template = environment().get_template(name)
    return mark_safe(
        rows_template.render(
            rows=rows,
            row_url=row_url_function(context),
            csrf_input=_csrf_input(context),
            **values,
        )
    )


def _csrf_input(context: template.Context):
    """``{% csrf_token %}``'s markup and token for a row's form, made by Django's own node
    at the first row that asks (a page without forms does not touch the token)."""
    made: list[str] = []

    def csrf_input() -> str:
        if not made:
            made.append(CsrfTokenNode().render(context))
        return made[0]

    return csrf_input
