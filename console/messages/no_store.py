"""Console pages carrying message data are never stored by browsers or proxies: the one
list of them, and the middleware giving their answers ``Cache-Control: no-store`` (the
API's answers get it from console.api.middleware.NoStoreMiddleware)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

#: The pages (URL names) that show message bodies, keys, properties or events.
MESSAGE_DATA_PAGES = frozenset(
    {
        "messages:search",
        "messages:detail",
        "messages:body",
        "messages:export",
        "streams:stream",
        "groups:dlq",
        "topics:detail",
    }
)


def carries_message_data(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return match is not None and match.view_name in MESSAGE_DATA_PAGES


class MessageDataNoStoreMiddleware:
    """``Cache-Control: no-store`` (with Django's never-cache set) on MESSAGE_DATA_PAGES,
    whatever they answer (a page, a download, a form with errors)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if carries_message_data(request):
            add_never_cache_headers(response)
        return response
