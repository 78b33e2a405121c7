"""One pager for every paged list: ``{% pager page %}`` renders ``_pager.html``.

``page`` is a Django ``Page``, or anything with ``number``, ``has_previous``,
``has_next``, ``previous_page_number`` and ``next_page_number`` (a search page without a
count has ``paginator`` None: no "of N", no "Last"). Links keep the request's query and
set ``param``; with ``keep=False`` they carry ``param`` and the other keyword arguments
alone (a page holding several paged tables). ``anchor`` is the fragment the links scroll
to; ``ends=False`` leaves out "First" and "Last".
"""

from __future__ import annotations

from typing import Any

from django import template
from django.http import QueryDict

register = template.Library()


@register.inclusion_tag("_pager.html", takes_context=True)
def pager(
    context: template.Context,
    page: Any,
    param: str = "page",
    label: str = "Pages",
    anchor: str = "",
    previous: str = "Previous",
    next: str = "Next",  # noqa: A002  (the link's word, as the template names it)
    ends: bool = True,
    keep: bool = True,
    **fixed: Any,
) -> dict:
    if not page:
        return {"links": None}
    paginator = getattr(page, "paginator", None)
    pages = paginator.num_pages if paginator is not None else None
    last = pages if ends else None
    if not (page.has_previous() or page.has_next()):
        return {"links": None}
    request = context.get("request")
    base = request.GET.copy() if keep and request is not None else QueryDict(mutable=True)
    for name, value in fixed.items():
        base[name] = str(value)
    fragment = f"#{anchor}" if anchor else ""

    def href(number: int) -> str:
        query = base.copy()
        query[param] = str(number)
        return f"?{query.urlencode()}{fragment}"

    links = []
    if page.has_previous():
        if last is not None:
            links.append({"href": href(1), "text": "First", "rel": ""})
        links.append({"href": href(page.previous_page_number()), "text": previous, "rel": "prev"})
    after = []
    if page.has_next():
        after.append({"href": href(page.next_page_number()), "text": next, "rel": "next"})
        if last is not None:
            after.append({"href": href(last), "text": "Last", "rel": ""})
    return {"links": links, "after": after, "label": label, "number": page.number, "of": pages}
