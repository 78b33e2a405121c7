"""API answers and the console pages carrying message data are never stored by browsers or
proxies (they hold data a session read), and an unexpected failure under /api/ is a JSON 500
in the API's one error shape, not the console's HTML page."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers

from console.messages.no_store import carries_message_data

API_PREFIX = "/api/"

logger = logging.getLogger("console.api")


class NoStoreMiddleware:
    """``Cache-Control: no-store`` (with Django's never-cache set) on every /api/ answer and
    on every answer of the pages carrying message data (console.messages.no_store's
    MESSAGE_DATA_PAGES), whatever they answer (a page, a download, a form with errors)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.startswith(API_PREFIX) or carries_message_data(request):
            add_never_cache_headers(response)
        return response


class JsonServerErrorMiddleware:
    """An exception no API handler answered (in a view, or rendering its answer) becomes a
    JSON 500 saying only that it happened; the traceback goes to the log."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path_info.startswith(API_PREFIX):
            return None
        # Imported here: console.api.errors loads DRF's settings, which load this module's
        # neighbours (the parsers) while the middleware list is still being read.
        from console.api.errors import error_body

        logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500},
        )
        return JsonResponse(
            error_body(
                "server_error",
                "The server failed to answer this request; the error is in its log.",
            ),
            status=500,
        )
