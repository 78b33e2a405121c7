"""Page-number pagination for every list: ``?page=`` (from 1) and ``?page_size=`` (from 1,
default 50, at most 500: more is 500). Anything else in either, a repeat included, is a 400
naming the parameter; a page past the last is a 404. The one rule for every list, the
message search included (``page_number`` and ``get_page_size``)."""

from typing import Any

from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from console.api.errors import ApiError
from console.api.query_string import given_more_than_once


def _refusal(name: str, message: str, detail: str) -> ApiError:
    return ApiError(
        400,
        "invalid",
        f"{name}: {message}",
        {"fields": {name: [{"message": detail, "code": "invalid"}]}},
    )


def _whole_number(request: Request, name: str, default: int, sentence: str) -> int:
    if name not in request.query_params:
        return default
    for repeated, said in given_more_than_once(request.query_params, {name}).items():
        raise _refusal(repeated, said, said)
    raw = request.query_params[name]
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise _refusal(
            name, f"{sentence}, not {raw[:40]!r}.", f"{sentence[0].upper()}{sentence[1:]}."
        )
    return value


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def page_number(self, request: Request) -> int:
        """The page asked for: a whole number from 1 (1 when not given)."""
        return _whole_number(
            request, self.page_query_param, 1, "a page number is a whole number from 1"
        )

    def get_page_size(self, request: Request) -> int:
        size = _whole_number(
            request,
            self.page_size_query_param,
            self.page_size,
            "a page size is a whole number from 1",
        )
        return min(size, self.max_page_size)

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        self.page_number(request)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        # No maximum: a larger page size is not refused but taken as max_page_size.
        bounds = {self.page_query_param: {"minimum": 1}, self.page_size_query_param: {"minimum": 1}}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


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
