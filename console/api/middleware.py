"""API answers are never stored by browsers or proxies: they hold data a session read."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

API_PREFIX = "/api/"


class NoStoreMiddleware:
    """``Cache-Control: no-store`` (with Django's never-cache set) on every /api/ answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.startswith(API_PREFIX):
            add_never_cache_headers(response)
        return response
