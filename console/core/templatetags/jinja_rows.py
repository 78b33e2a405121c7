"""A list's rows rendered by Jinja2, e.g.
``{% render_rows "topics/_rows.jinja" page manageable=manageable %}``.

The ``.jinja`` template gets ``rows`` (the second argument) and the keyword arguments,
plus ``row_url`` bound to this request (console/core/jinja.py says why and how it
escapes). Its output is inserted as it is (already escaped).
"""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from console.core.jinja import environment
from console.core.templatetags.url_tags import row_url_function

register = template.Library()


@register.simple_tag(takes_context=True)
def render_rows(context: template.Context, name: str, rows, **values) -> SafeString:
    rows_template = environment().get_template(name)
    return mark_safe(rows_template.render(rows=rows, row_url=row_url_function(context), **values))
