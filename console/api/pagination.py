"""Page-number pagination for every list: ``?page=`` and ``?page_size=`` (≤ 500)."""

from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


_PAGES: dict[type[serializers.Serializer], type[serializers.Serializer]] = {}


def paginated(item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The schema of a page of ``item``: what ``Pagination.get_paginated_response`` sends,
    for ``extend_schema(responses=...)`` on APIViews (which drf-spectacular cannot infer)."""
    if item not in _PAGES:
        name = item.__name__.removesuffix("Serializer")
        _PAGES[item] = type(
            f"Paginated{name}List",
            (serializers.Serializer,),
            {
                "count": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": item(many=True),
                "__module__": __name__,
            },
        )
    return _PAGES[item]
