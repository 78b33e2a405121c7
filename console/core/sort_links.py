"""The sortable header links of a list page, made with one copy of the query string.

Each link is what Django's ``{% querystring sort=… page=None %}`` gives (the request's
query with ``sort`` set and ``page`` dropped), but that tag copies the whole query
(``QueryDict.copy`` is a deep copy) once a link; a page with seven sortable columns made
seven copies."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import QueryDict


def sort_links(query: QueryDict, sorts: Mapping[str, str]) -> dict[str, str]:
    """``{column: "?<query with sort=<sorts[column]>, without page>"}`` for each column."""
    params = query.copy()
    if "page" in params:
        del params["page"]
    links = {}
    for column, sort in sorts.items():
        params["sort"] = sort
        links[column] = f"?{params.urlencode()}"
    return links


def header_sort_links(query: QueryDict, sort: str, columns: tuple[str, ...]) -> dict[str, str]:
    """A list's header links: the name's turns its order, each of ``columns`` sorts by its
    own name."""
    name = "-name" if sort == "name" else "name"
    return sort_links(query, {"name": name, **{column: column for column in columns}})
