"""Console pages carrying message data are never stored by browsers or proxies: the one
list of them. console.api.middleware.NoStoreMiddleware gives their answers, and the API's,
``Cache-Control: no-store``."""

from __future__ import annotations

from django.http import HttpRequest

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
