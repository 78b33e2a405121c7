"""The query string's rule that every operation shares, read by the query serializers and
the pagination alike (importing neither: pagination loads while DRF's views do)."""

from __future__ import annotations

from collections.abc import Container

from django.http import QueryDict


def given_more_than_once(query: QueryDict, names: Container[str] | None = None) -> dict[str, str]:
    """What to say of each query parameter (of ``names``, or all) that ``query`` (a
    QueryDict) gives more than once: every parameter of the API takes one value (a list
    is one comma-separated value), so a repeat is refused rather than one value taken."""
    return {
        name: f"Give this parameter once (it was given {len(values)} times)."
        for name, values in query.lists()
        if len(values) > 1 and (names is None or name in names)
    }
