"""Message pages: search (/messages/), detail (/messages/<id>/), body download, export.

All are reads: GET (and HEAD) only, for the viewer role and up. The store comes from
`get_store()`; engine errors become form errors or a 404 page with the engine's sentence.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.accounts.permissions import READ, TOPIC, require, visible_topics
from console.audit.reads import note_count
from console.core.store import get_store
from console.messages import bodies, search
from console.messages.consumption import consumption_rows
from console.messages.forms import (
    MODE_ID,
    MODE_KEY,
    MODE_NAMES,
    MODE_RANGE,
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
    if results is not None and results.mode == MODE_ID:
        for found in results.rows:  # by id, the topic shows only once the message is read
            require(request.user, TOPIC, found.message.topic, READ)
    return _search_page(request, store, form, results)


@require_safe
def message_export(request: HttpRequest) -> HttpResponse:
    """A queue range as JSON Lines (at most EXPORT_MAX messages), as a download.

    ?topic=&queue=&from=&to= (``to`` not included; ``from``/``to`` default to the queue's
    first and end offsets). Bad parameters show the search form with its errors (400).
    """
    store = get_store()
    data = request.GET.copy()
    data["mode"] = MODE_RANGE
    form = MessageSearchForm(data, store=store)
    if not form.is_valid():
        return _search_page(request, store, form, None, status=400)
    topic, queue = form.cleaned_data["topic"], form.cleaned_data["queue"]
    start, end = form.cleaned_data.get("from"), form.cleaned_data.get("to")
    try:
        first, last = search.export_span(store, topic, queue, start, end)
    except StoreError as error:
        form.add_error(_error_field(MODE_RANGE, error), str(error))
        return _search_page(request, store, form, None, status=400)
    name = search.export_filename(topic, queue, first, last)
    response = StreamingHttpResponse(
        search.export_lines(store, topic, queue, first, last),
        content_type="application/x-ndjson; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


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
