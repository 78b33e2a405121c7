"""The event streams page (/streams/): find a stream of a stream topic by its id and list
its events (version, type, command id, store time, body as text, JSON or hex), a page of
PAGE_SIZE at a time from any version. Read only: GET and HEAD, for the viewer role and up.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.accounts.permissions import READ, TOPIC, permissions_of, visible_topics
from console.core.store import get_store
from console.messages import bodies
from console.streams.forms import PARAMETERS, VIEWS, StreamForm
from storeadapter.engine import StoredEvent, StoreError

#: Events listed on a page.
PAGE_SIZE = 50
#: Bytes of each body shown in the list (the message page shows the whole).
BODY_LIMIT = 4096


def _shown(event: StoredEvent, view: str) -> dict:
    """One event's row: its body shown the chosen way, cut at BODY_LIMIT bytes."""
    body = event.body[:BODY_LIMIT]
    note = ""
    if view == "json":
        shown = bodies.as_json(event.body) if len(event.body) <= BODY_LIMIT else None
        if shown is None:
            note = bodies.json_error(event.body) or "Too long to show as JSON here."
            content = bodies.as_text(body).content
        else:
            content = shown.content
    elif view == "hex":
        content = bodies.as_hex(body).content
    else:
        content = bodies.as_text(body).content
    return {
        "event": event,
        "stored": bodies.store_time(event.store_time_ms),
        "stored_text": bodies.readable_time(event.store_time_ms),
        "content": content,
        "note": note,
        "cut": len(event.body) > BODY_LIMIT,
        "size": len(event.body),
    }


def _page_links(request: HttpRequest, start: int, events, stream_version: int) -> dict:
    """The from-versions of the older, newer, first and last pages (None: no such page)."""
    query = request.GET.copy()

    def url(version: int) -> str:
        query["from_version"] = str(version)
        return "?" + query.urlencode()

    first = events.first_kept_version
    older = max(first, start - PAGE_SIZE) if start > first else None
    newer = events[-1].version + 1 if events and events[-1].version < stream_version else None
    last = max(first, stream_version - PAGE_SIZE + 1)
    return {
        "older": url(older) if older is not None else None,
        "newer": url(newer) if newer is not None else None,
        "first": url(first) if start > first else None,
        "last": url(last) if newer is not None and last > start else None,
    }


@require_safe
def stream_page(request: HttpRequest) -> HttpResponse:
    store = get_store()
    try:
        topics = [
            info.name
            for info in visible_topics(request.user, store.topics())
            if info.streams and permissions_of(request.user).allows(TOPIC, info.name, READ)
        ]
    except StoreError:
        topics = []
    submitted = bool(PARAMETERS & set(request.GET))
    form = StreamForm(request.GET if submitted else None, topics=topics)
    context: dict = {"form": form, "topics": topics, "views": VIEWS, "submitted": submitted}
    status = 200
    if submitted and form.is_valid():
        data = form.cleaned_data
        start = data.get("from_version") or 1
        try:
            events = store.read_stream(data["topic"], data["stream"], start, PAGE_SIZE)
        except StoreError as error:
            form.add_error(None, str(error))
            status = 400
        else:
            context.update(
                {
                    "topic": data["topic"],
                    "stream_id": data["stream"],
                    "view": data["view"],
                    "events": events,
                    "rows": [_shown(event, data["view"]) for event in events],
                    "start": max(start, events.first_kept_version),
                    "pages": _page_links(request, start, events, events.stream_version),
                }
            )
    elif submitted:
        status = 400
    return render(request, "streams/stream.html", context, status=status)
