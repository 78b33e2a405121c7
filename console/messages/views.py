"""Message pages: search (/messages/), detail (/messages/<id>/), body download, export.

All are reads: GET (and HEAD) only, for the viewer role and up. The store comes from
`get_store()`; engine errors become form errors or a 404 page with the engine's sentence.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from functools import partial
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

from console.accounts.permissions import READ, TOPIC, require, visible_topics
from console.audit.reads import note_count, note_streamed
from console.core.store import get_store
from console.messages import bodies, exports, search
from console.messages.consumption import consumption_rows
from console.messages.forms import (
    MODE_FILTER,
    MODE_ID,
    MODE_KEY,
    MODE_NAMES,
    MODE_RANGE,
    MODE_TIME,
    MODES,
    SEARCH_PARAMETERS,
    MessageSearchForm,
    to_ms,
)
from storeadapter.engine import (
    CorruptRecordError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidNameError,
    MessageNotFoundError,
    MessageStore,
    QueueNotFoundError,
    StoredMessage,
    StoreError,
    TopicNotFoundError,
)

#: Messages listed on each side of a message on its page.
NEIGHBOURS = 5
#: The body views of the detail page: (value of ?view=, tab label).
BODY_VIEWS: tuple[tuple[str, str], ...] = (("text", "Text"), ("json", "JSON"), ("hex", "Hex"))


def _error_field(mode: str, error: StoreError) -> str | None:
    """The form field an engine error is about (None: the whole form)."""
    if isinstance(error, (InvalidMessageIdError, MessageNotFoundError, CorruptRecordError)):
        return "id" if mode == MODE_ID else None
    if isinstance(error, (TopicNotFoundError, InvalidNameError)):
        return "topic"
    if isinstance(error, QueueNotFoundError):
        return "queue" if mode == MODE_RANGE else None
    if isinstance(error, InvalidMessageError) and mode == MODE_KEY:
        return "key"
    return None


def _run(
    store: MessageStore, form: MessageSearchForm, page: int, table_page: int
) -> search.Results:
    data = form.cleaned_data
    mode = data["mode"]
    if mode == MODE_ID:
        return search.by_id(store, data["id"])
    if mode == MODE_KEY:
        return search.by_key(store, data["topic"], data["key"], form.begin_ms, form.end_ms, page)
    if mode == MODE_RANGE:
        return search.by_range(
            store, data["topic"], data["queue"], data.get("from"), data.get("to"), page
        )
    if mode == MODE_FILTER:
        return search.by_filter(store, data["topic"], data["expression"], data.get("cursor"))
    return search.by_time(store, data["topic"], to_ms(data["at"]), data["queues"], table_page)


def _search_page(
    request: HttpRequest,
    store: MessageStore,
    form: MessageSearchForm,
    results: search.Results | None,
    status: int = 200,
) -> HttpResponse:
    mode = form.mode_value
    tabs = [
        {"mode": value, "label": label, "current": value == mode, "url": f"?mode={value}"}
        for value, label in MODES
    ]
    try:
        topic_names = (
            [info.name for info in visible_topics(request.user, store.topics())]
            if mode != MODE_ID
            else []
        )
    except StoreError:
        topic_names = []
    context = {
        "form": form,
        "mode": mode,
        "mode_name": MODE_NAMES[mode],
        "tabs": tabs,
        "results": results,
        "topic_names": topic_names,
        # The datalist's options, one string (not a template look-up a topic); escaped by
        # html.escape, which is Django's escape without its lazy wrapper and SafeString.
        "topic_options": mark_safe(
            "".join(f'<option value="{html.escape(name)}">' for name in topic_names)
        ),
        "searched": form.is_bound,
    }
    return render(request, "messages/search.html", context, status=status)


@require_safe
def message_search(request: HttpRequest) -> HttpResponse:
    """The search form and, once submitted, a bounded page of results."""
    store = get_store()
    submitted = bool(SEARCH_PARAMETERS & set(request.GET))
    if submitted:
        form = MessageSearchForm(request.GET, store=store)
    else:
        form = MessageSearchForm(initial={"mode": request.GET.get("mode")}, store=store)
        first_field = form.active_fields()[0].name
        form.fields[first_field].widget.attrs["autofocus"] = True
    results = None
    if submitted and form.is_valid():
        try:
            results = _run(
                store,
                form,
                search.page_number(request.GET.get("page")),
                search.page_number(request.GET.get("queue_page")),
            )
        except StoreError as error:
            form.add_error(_error_field(form.cleaned_data["mode"], error), str(error))
    if results is not None:
        note_count(request, len(results.rows))
        exportable = results.rows or (results.mode == MODE_FILTER and results.continue_url)
        if results.mode in EXPORT_LABELS and exportable:
            results.export_url = export_url({**request.GET.dict(), "mode": results.mode})
            results.export_label = EXPORT_LABELS[results.mode]
    if results is not None and results.mode == MODE_ID:
        for found in results.rows:  # by id, the topic shows only once the message is read
            require(request.user, TOPIC, found.message.topic, READ)
    return _search_page(request, store, form, results)


#: What the export link of a search's results exports, by mode (a queue range's says its
#: offsets: console.messages.search.by_range).
EXPORT_LABELS = {
    MODE_KEY: "every message with this key, newest first",
    MODE_TIME: "every message stored from this time on, oldest first",
    MODE_FILTER: "every message this expression matches, by queue and offset",
}


#: Query-string names of the page that are no part of the search an export repeats.
_NOT_EXPORTED = ("page", "queue_page", "skip", "since_ms", "until_ms", "max_records", "max_seconds")


def export_url(params: dict) -> str:
    """The page's export of a search (``params``: the search's query string)."""
    kept = {k: v for k, v in params.items() if k not in _NOT_EXPORTED and v not in ("", None)}
    return f"{reverse('messages:export')}?{urlencode(kept)}"


#: The page's names for where an export goes on (to the millisecond, unlike its form's).
_PAGE_NAMES = {"since": "since_ms", "until": "until_ms"}


@require_safe
def message_export(request: HttpRequest) -> HttpResponse:
    """A search's result set as JSON Lines, as a download (console.messages.exports): a
    queue range (?topic=&queue=&from=&to=, ``to`` not included), a search by key
    (?mode=key&topic=&key=&since=&until=), by time (?mode=time&topic=&at=&first_queue=
    &last_queue=) or by expression (?mode=filter&topic=&expression=&cursor=);
    ``max_records``/``max_seconds`` bound it, and its last line says how far it got and
    the URL that continues it. Bad parameters show the search form with its errors (400).
    """
    store = get_store()
    data = request.GET.copy()
    mode = data.get("mode") or MODE_RANGE
    data["mode"] = mode
    form = MessageSearchForm(data, store=store)
    options = exports.ExportOptionsForm(request.GET)
    valid = form.is_valid() & options.is_valid()
    if valid and mode == MODE_ID:
        form.add_error(
            None, "An export is of a search by key, by queue range, by time or by expression."
        )
        valid = False
    if not valid:
        for name, errors in options.errors.items():
            for error in errors:
                form.add_error(None, f"{name}: {error}")
        return _search_page(request, store, form, None, status=400)
    params = {k: v for k, v in request.GET.items() if k not in _NOT_EXPORTED[:2]}
    params["mode"] = mode
    try:
        budget = options.budget(partial(note_streamed, request))
        lines, name = _export(store, form, options, budget, params)
    except StoreError as error:
        form.add_error(_error_field(mode, error), str(error))
        return _search_page(request, store, form, None, status=400)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _export(
    store: MessageStore,
    form: MessageSearchForm,
    options: exports.ExportOptionsForm,
    budget: exports.Budget,
    params: dict,
) -> tuple[Iterator[bytes], str]:
    """The lines of the export the forms ask for, and its file name."""
    data, chosen = form.cleaned_data, options.cleaned_data
    topic, skip = data["topic"], chosen.get("skip") or 0
    if data["mode"] == MODE_KEY:
        until_ms = chosen.get("until_ms")
        lines = exports.key_export(
            store,
            topic,
            data["key"],
            form.begin_ms,
            form.end_ms if until_ms is None else until_ms,
            skip,
            budget,
            exports.Continuation(reverse("messages:export"), params, _PAGE_NAMES),
        )
        return lines, exports.filename(topic, "key")
    if data["mode"] == MODE_TIME:
        since_ms = chosen.get("since_ms")
        lines = exports.time_export(
            store,
            topic,
            to_ms(data["at"]) if since_ms is None else since_ms,
            None,
            data["queues"],
            skip,
            budget,
            exports.Continuation(reverse("messages:export"), params, _PAGE_NAMES),
        )
        return lines, exports.filename(topic, "time")
    if data["mode"] == MODE_FILTER:
        lines = exports.filter_export(
            store,
            topic,
            data["expression"],
            None,
            data.get("cursor") or None,
            budget,
            exports.Continuation(reverse("messages:export"), params),
        )
        return lines, exports.filename(topic, "filter")
    queue = data["queue"]
    first, last = search.range_span(store, topic, queue, data.get("from"), data.get("to"))[2:4]
    first += skip
    lines = exports.range_export(
        store,
        topic,
        queue,
        min(first, last),
        last,
        budget,
        exports.Continuation(reverse("messages:export"), params),
    )
    return lines, search.export_filename(topic, queue, first, last)


def _not_found(request: HttpRequest, message_id: str, error: StoreError) -> HttpResponse:
    return render(
        request,
        "messages/not_found.html",
        {
            "message_id": message_id,
            "error": str(error),
            "corrupt": isinstance(error, CorruptRecordError),
        },
        status=404,
    )


_UNREADABLE = (InvalidMessageIdError, MessageNotFoundError, CorruptRecordError)


def _neighbours(
    store: MessageStore, message: StoredMessage
) -> tuple[list[search.Row], list[search.Row]]:
    """The NEIGHBOURS messages before and after `message` in its queue."""
    start = max(0, message.queue_offset - NEIGHBOURS)
    wanted = message.queue_offset - start + 1 + NEIGHBOURS
    read = store.read_result(message.topic, message.queue, start, wanted)
    before = [m for m in read.messages if m.queue_offset < message.queue_offset]
    after = [m for m in read.messages if m.queue_offset > message.queue_offset]
    return (
        [search.row(m) for m in before[-NEIGHBOURS:]],
        [search.row(m) for m in after[:NEIGHBOURS]],
    )


@require_safe
def message_detail(request: HttpRequest, message_id: str) -> HttpResponse:
    """Every field of one message, its body as text, JSON or hex, and its neighbours."""
    store = get_store()
    try:
        message = store.get(message_id)
    except _UNREADABLE as error:
        return _not_found(request, message_id, error)
    require(request.user, TOPIC, message.topic, READ)
    note_count(request, 1)
    body = message.body
    view = request.GET.get("view")
    if view not in dict(BODY_VIEWS):
        view = bodies.best_view(body)
    json_note = ""
    if view == "json":
        shown = bodies.as_json(body)
        if shown is None:
            json_note = bodies.json_error(body)
    elif view == "hex":
        shown = bodies.as_hex(body)
    else:
        shown = bodies.as_text(body)
    neighbours_error = ""
    try:
        before, after = _neighbours(store, message)
    except StoreError as error:
        before, after = [], []
        neighbours_error = str(error)
    context = {
        "message": message,
        "row": search.row(message),
        "born_text": bodies.readable_time(message.born_time_ms),
        "born": bodies.store_time(message.born_time_ms),
        "properties": sorted(message.properties.items()),
        "key_links": [(key, search.key_url(message.topic, key)) for key in message.keys],
        "range_url": search.range_url(message.topic, message.queue, message.queue_offset),
        "view": view,
        "views": [
            {"value": value, "label": label, "current": value == view}
            for value, label in BODY_VIEWS
        ],
        "shown": shown,
        "json_note": json_note,
        "size": len(body),
        "display_limit": bodies.DISPLAY_LIMIT,
        "before": before,
        "after": after,
        "neighbours_error": neighbours_error,
        "neighbour_count": NEIGHBOURS,
        "consumption": consumption_rows(request.user, message),
    }
    return render(request, "messages/detail.html", context)


@require_safe
def message_body(request: HttpRequest, message_id: str) -> HttpResponse:
    """The whole body of a message, as a download."""
    store = get_store()
    try:
        message = store.get(message_id)
    except _UNREADABLE as error:
        return _not_found(request, message_id, error)
    require(request.user, TOPIC, message.topic, READ)
    response = HttpResponse(message.body, content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{message.message_id}.bin"'
    response["Content-Length"] = str(len(message.body))
    return response
