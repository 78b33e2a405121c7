"""/topics/ and /topics/<topic>/: the topic list, one topic's queues, groups and messages.

Every change is a POST to the page it is shown on, with an ``action`` field on the detail
page; each action needs its role (operator or admin), writes an audit row, and answers
with a redirect (a flash says what happened) or the page again with the form's errors.
Engine refusals (``StoreError``) are shown in the engine's own words, never as a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.accounts.permissions import (
    MANAGE,
    READ,
    TOPIC,
    permissions_of,
    visible_groups,
    visible_topics,
)
from console.core.sort_links import header_sort_links
from console.core.store import get_store
from console.messages import tail
from console.monitoring import current, scale
from console.operations import topics as operations
from console.topics.forms import (
    AddQueuesForm,
    AppendEventForm,
    DeleteTopicForm,
    QueueForm,
    TestMessageForm,
    TopicCreateForm,
    TopicSettingsForm,
)
from console.topics.listing import (
    DEFAULT_SORT,
    KIND_FILTERS,
    PAGE_SORTS,
    ListedTopic,
    search_and_sort,
)
from console.topics.rates import topic_produce_rates, topic_sizes
from console.topics.reads import latest_messages
from storeadapter.engine import (
    TOPIC_SETTINGS,
    DuplicateCommandError,
    InvalidNameError,
    MessageStore,
    QueueNotFoundError,
    StoreError,
    TopicExistsError,
    TopicInfo,
    WrongExpectedVersionError,
    filters,
)
from storeadapter.engine import clock as engine_clock
from storeadapter.stream_listing import find_streams, stream_rows
from storeadapter.summaries import (
    QueueRowList,
    TopicSummaryList,
    queue_rows,
    topic_group_summaries,
    topic_summaries,
)
from storeadapter.topic_kinds import RETRY, kind_of

PAGE_SIZE = 50
#: Queue rows per page of a topic's page.
QUEUE_PAGE_SIZE = 100
LATEST_MESSAGES = 20
#: Streams listed per page of a stream topic's page.
STREAM_PAGE_SIZE = 50
#: The header links sorting by their own column's name (the name's link turns its order).
HEADER_SORTS = ("kind", "queues", "messages", "produce_rate", "size", "last_write")
#: Sorts whose keys read only a topic's name, queue count, kind and sampled produce rate
#: and size (see console/topics/listing.py), not its queues.
METADATA_SORTS = frozenset({"name", "-name", "queues", "kind", "produce_rate", "size"})


@dataclass(frozen=True)
class _TopicMetadata:
    """What the metadata sorts read of a topic."""

    name: str
    queues: int
    kind: str
    produce_rate: float | None
    size_bytes: int | None


def _detail_url(topic: str, fragment: str = "") -> str:
    url = reverse("topics:detail", args=[topic])
    return f"{url}#{fragment}" if fragment else url


def _queue_url(topic: str, queue: int) -> str:
    """The page of the topic's queues holding ``queue``, at its row."""
    return f"{reverse('topics:detail', args=[topic])}?queue={queue}#queue-{queue}"


# ---------------------------------------------------------------------------- list


@require_http_methods(["GET", "HEAD", "POST"])
def topic_list(request: HttpRequest) -> HttpResponse:
    """Every topic, searched, sorted and paged; admins also get the create form."""
    store = get_store()
    if request.method == "POST":
        form = TopicCreateForm(request.POST)
        created = _create_topic(request, store, form)
        if created is not None:
            return created
    else:
        form = TopicCreateForm()

    query = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort not in PAGE_SORTS:
        sort = DEFAULT_SORT
    kind = request.GET.get("kind", "")
    if kind not in KIND_FILTERS:
        kind = ""
    listed_kinds = KIND_FILTERS[kind][1]
    # Search, filter by kind, and sort by name, queue count, kind or produce rate on the
    # topics' metadata and the samples (those sort keys read nothing else); message counts
    # and last writes are read only for the topics shown, or for those matching when the
    # sort is by one of them.
    every_info = visible_topics(request.user, store.topics())
    kinds = {info.name: kind_of(info) for info in every_info}
    infos = [info for info in every_info if kinds[info.name] in listed_kinds]
    retry_hidden = sum(1 for k in kinds.values() if k == RETRY) if RETRY not in listed_kinds else 0
    total = len(infos)
    samples = current.latest_two()  # one look-up for both
    rates = topic_produce_rates(samples)
    sizes = topic_sizes(samples)
    figures = scale.SampledFigures()

    def listed(summary) -> ListedTopic:
        name = summary.name
        return ListedTopic(
            summary, kinds[name], rates.get(name), sizes.get(name), sizes.state(name)
        )

    if sort in METADATA_SORTS:
        metadata = [
            _TopicMetadata(
                info.name, info.queues, kinds[info.name], rates.get(info.name), sizes.get(info.name)
            )
            for info in infos
        ]
        names = [t.name for t in search_and_sort(metadata, query, sort, PAGE_SORTS)]
        listing = TopicSummaryList(store, names, figures)
    else:
        names = [t.name for t in search_and_sort(infos, query)]
        listing = search_and_sort(
            [listed(summary) for summary in topic_summaries(store, names, figures)],
            "",
            sort,
            PAGE_SORTS,
        )
    page = Paginator(listing, PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = [
        row if isinstance(row, ListedTopic) else listed(row) for row in page.object_list
    ]
    # The topics of the page the user may delete (the "Delete selected…" checkboxes).
    permissions = permissions_of(request.user)
    manageable = {
        row.name for row in page.object_list if permissions.allows(TOPIC, row.name, MANAGE)
    }
    return render(
        request,
        "topics/list.html",
        {
            "page": page,
            "query": query,
            "sort": sort,
            "sorts": [(value, label) for value, (label, _, _) in PAGE_SORTS.items()],
            "kind": kind,
            "sort_links": header_sort_links(request.GET, sort, HEADER_SORTS),
            "kind_filters": [(value, label) for value, (label, _) in KIND_FILTERS.items()],
            "retry_hidden": retry_hidden,
            "total": total,
            "form": form,
            "manageable": manageable,
        },
    )


def _create_topic(
    request: HttpRequest, store: MessageStore, form: TopicCreateForm
) -> HttpResponse | None:
    """Create the topic and redirect to it, or None with the errors added to `form`."""
    if not form.is_valid():
        return None
    name, queues = form.cleaned_data["name"], form.cleaned_data["queues"]
    kind = form.cleaned_data["kind"]
    try:
        info = operations.create_topic(request.user, name, queues, kind)
    except (InvalidNameError, TopicExistsError) as error:
        form.add_error("name", str(error))
        return None
    except StoreError as error:
        form.add_error(None, str(error))
        return None
    what = "stream topic" if info.streams else "topic"
    messages.success(
        request, f"Created {what} {info.name} with {info.queues} queue{_s(info.queues)}."
    )
    return redirect(_detail_url(info.name))


# -------------------------------------------------------------------------- detail


@dataclass(frozen=True)
class ConsumerLag:
    """A group consuming this topic: its lag here and on how many queues it is behind."""

    group: str
    lag: int
    queues_behind: int
    queues: int


Handler = Callable[[HttpRequest, MessageStore, TopicInfo], "HttpResponse | dict"]


@require_http_methods(["GET", "HEAD", "POST"])
def topic_detail(request: HttpRequest, topic: str) -> HttpResponse:
    """One topic: queues, consuming groups, latest messages; actions by role."""
    store = get_store()
    try:
        info = store.topic(topic)
    except StoreError:
        return _not_found(request, topic)
    bound_forms: dict = {}
    if request.method == "POST":
        handler = ACTIONS.get(request.POST.get("action", ""))
        if handler is None:
            messages.error(request, "That action is not known; nothing was changed.")
            return redirect(_detail_url(topic))
        result = handler(request, store, info)
        if isinstance(result, HttpResponse):
            return result
        bound_forms = result
    return _render_detail(request, store, topic, bound_forms)


#: The rates a tail page offers (messages a second), and its default.
TAIL_RATES = (10, 50, 100, 500, 1000)
TAIL_DEFAULT_RATE = 50


@require_http_methods(["GET", "HEAD"])
def topic_tail(request: HttpRequest, topic: str) -> HttpResponse:
    """The live tail of a topic (all queues, or ``?queues=0,2``; only what a
    ``?filter=`` expression matches): static/js/tail.js polls the API's tail from the
    cursor the page starts at (console/messages/tail.py)."""
    store = get_store()
    try:
        info = store.topic(topic)
    except StoreError:
        return _not_found(request, topic)
    queues_text = request.GET.get("queues", "").strip()
    rate_text = request.GET.get("rate", "")
    rate = int(rate_text) if rate_text.isdigit() and int(rate_text) in TAIL_RATES else None
    error = None
    if rate_text and rate is None:
        shown = ", ".join(map(str, TAIL_RATES))
        error = f"Show at most {shown} messages a second; {rate_text[:20]!r} is none of them."
    try:
        queues = tail.parse_queues(queues_text)
        cursor = tail.start(store, topic, queues)
    except (tail.TailError, QueueNotFoundError) as refused:
        error = (
            str(refused)
            if isinstance(refused, tail.TailError)
            else f"Topic {topic} has queues 0 to {info.queues - 1}; choose among them."
        )
        queues_text, queues, cursor = "", None, tail.start(store, topic, None)
    expression = request.GET.get("filter", "").strip()
    if expression:
        try:
            filters.compile_filter(expression)
        except filters.FilterSyntaxError as refused:
            error = f"The filter expression does not compile: {refused}."
            expression = ""
    asked = {"cursor": str(cursor), "queues": queues_text, "filter": expression}
    export_url = (
        reverse("api-topic-tail-export", args=[info.name])
        + "?"
        + urlencode({name: value for name, value in asked.items() if value})
    )
    context = {
        "topic": info,
        "export_url": export_url,
        "queues_text": queues_text,
        "queues": queues,
        "expression": expression,
        "expression_max": filters.MAX_EXPRESSION,
        "cursor": str(cursor),
        "rate": rate or TAIL_DEFAULT_RATE,
        "rates": TAIL_RATES,
        "wait_s": TAIL_WAIT_S,
        "error": error,
        "kept": TAIL_KEPT_ROWS,
    }
    return render(request, "topics/tail.html", context, status=400 if error else 200)


#: How long each of the tail page's polls waits, and how many rows the page keeps.
TAIL_WAIT_S = 25
TAIL_KEPT_ROWS = 500


def _not_found(request: HttpRequest, topic: str) -> HttpResponse:
    return render(request, "topics/not_found.html", {"topic": topic}, status=404)


def _render_detail(
    request: HttpRequest, store: MessageStore, topic: str, bound_forms: dict
) -> HttpResponse:
    """The page; a big topic (``scale.is_big``) reads only the queues of the page shown
    and takes its totals from the latest sample."""
    try:
        info = store.topic(topic)
        paginator = Paginator(QueueRowList(store, info), QUEUE_PAGE_SIZE)
        wanted_queue = _wanted_queue(request, info)
        if request.GET.get("page") or wanted_queue is None:
            page = paginator.get_page(request.GET.get("page"))
        else:
            page = paginator.get_page(wanted_queue // QUEUE_PAGE_SIZE + 1)
        rows = list(page.object_list)
        big = scale.is_big(info)
        figures = scale.SampledFigures()
        # Message data only for a user who may read the topic (view shows its figures).
        may_read = permissions_of(request.user).allows(TOPIC, topic, READ)
        reading = LATEST_MESSAGES if may_read else 0
        if big:
            totals = _sampled_totals(topic)
            latest = latest_messages(store, topic, rows, reading) if reading else []
        else:
            every_row = queue_rows(store, topic)
            writes = [row.last_write_ms for row in every_row if row.last_write_ms is not None]
            totals = {
                "messages_total": sum(row.messages for row in every_row),
                "last_write_ms": max(writes) if writes else None,
            }
            latest = latest_messages(store, topic, every_row, reading) if reading else []
        summaries = visible_groups(
            request.user,
            topic_group_summaries(store, topic, with_queues=False, figures=figures),
        )
        streams = _streams_context(request, store, info) if info.streams else {}
    except (StoreError, KeyError):  # deleted meanwhile
        return _not_found(request, topic)
    consumers = [
        ConsumerLag(summary.group, summary.lag, summary.queues_behind, summary.queue_count)
        for summary in summaries
    ]
    consumers.sort(key=lambda c: (-c.lag, c.group))
    context = {
        "topic": info,
        "big": big,
        "page": page,
        "rows": rows,
        "wanted_queue": wanted_queue,
        "queue_page_size": QUEUE_PAGE_SIZE,
        **totals,
        "frozen_count": len(info.frozen),
        "removable_queue": info.queues - 1 if info.queues > 1 else None,
        "consumers": consumers,
        "latest": latest,
        "may_read": may_read,
        "latest_limit": LATEST_MESSAGES,
        "send_form": TestMessageForm(),
        "append_form": AppendEventForm(),
        **streams,
        "add_form": AddQueuesForm(),
        "delete_form": DeleteTopicForm(topic=topic),
        "settings_rows": _settings_rows(store, info),
        "settings_form": TopicSettingsForm(own=info.settings, defaults=_defaults(store)),
        **bound_forms,
    }
    return render(request, "topics/detail.html", context)


def _streams_context(request: HttpRequest, store: MessageStore, info: TopicInfo) -> dict:
    """A stream topic's streams, searched by ``?stream_q=`` and paged by ``?streams_page=``;
    the versions of the page's rows are read now."""
    query = request.GET.get("stream_q", "").strip()[:200]
    listing = find_streams(store, info.name, query)
    page = Paginator(listing.ids, STREAM_PAGE_SIZE).get_page(request.GET.get("streams_page"))
    return {
        "streams": stream_rows(store, info.name, list(page.object_list)),
        "streams_page": page,
        "stream_query": query,
        "streams_partial": listing.partial,
        "streams_scanned": listing.scanned,
    }


def _wanted_queue(request: HttpRequest, info: TopicInfo) -> int | None:
    """``?queue=``: a queue to jump to (its page is shown and the row marked), or None."""
    raw = request.GET.get("queue", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) >= info.queues:
        messages.error(
            request, f"Topic {info.name} has queues 0 to {info.queues - 1}; {raw[:20]} is not one."
        )
        return None
    return int(raw)


def _sampled_totals(topic: str) -> dict:
    """A big topic's totals from its newest sample, with what the page says about it."""
    row = scale.topic_sample(topic)
    if row is None:
        return {"messages_total": None, "last_write_ms": None, "sample": None}
    return {
        "messages_total": row.messages,
        "last_write_ms": row.last_write_ms,
        "sample": {
            "ts_ms": row.ts_ms,
            "age_s": max(0, engine_clock.now_ms() - row.ts_ms) // 1000,
            "sampled_queues": row.sampled_queues,
            "queues": row.queue_count,
            "rotating": row.sampled_queues < row.queue_count,
            "oldest_ms": row.oldest_ms,
        },
    }


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _queue_from(request: HttpRequest) -> int | None:
    """The POSTed queue id, or None after flashing why it is not usable."""
    form = QueueForm(request.POST)
    if form.is_valid():
        return form.cleaned_data["queue"]
    messages.error(request, "Choose a queue by its number (0 or more); nothing was changed.")
    return None


def _send_message(request: HttpRequest, store: MessageStore, info: TopicInfo):
    form = TestMessageForm(request.POST)
    if info.streams:
        messages.error(
            request,
            f"{info.name} is a stream topic: append an event to a stream instead; nothing "
            "was sent.",
        )
        return redirect(_detail_url(info.name, "append"))
    if not form.is_valid():
        return {"send_form": form}
    data = form.cleaned_data
    try:
        result = operations.send_test_message(
            request.user,
            info.name,
            data["body"],
            key=data["key"],
            tag=data["tag"],
            properties=data["properties"],
        )
    except StoreError as error:
        form.add_error(None, str(error))
        return {"send_form": form}
    messages.success(
        request,
        f"Sent message {result.message_id} to queue {result.queue} "
        f"at offset {result.queue_offset}.",
    )
    return redirect(_detail_url(info.name, "latest"))


def _append_event(request: HttpRequest, store: MessageStore, info: TopicInfo):
    form = AppendEventForm(request.POST)
    if not form.is_valid():
        return {"append_form": form}
    data = form.cleaned_data
    try:
        result = operations.append_typed_event(
            request.user,
            info.name,
            data["stream"],
            data["body"],
            expected_version=data["expected_version"],
            command_id=data["command_id"],
            event_type=data["event_type"],
        )
    except WrongExpectedVersionError as error:
        form.add_error(
            "expected_version",
            f"Stream {data['stream']} is at version {error.current_version}, not "
            f"{error.expected_version}; nothing was appended.",
        )
        return {"append_form": form}
    except DuplicateCommandError as error:
        form.add_error(
            "command_id",
            f"Command {data['command_id']} already produced version {error.version} of "
            f"stream {data['stream']}; nothing was appended.",
        )
        return {"append_form": form}
    except StoreError as error:
        form.add_error(None, str(error))
        return {"append_form": form}
    messages.success(
        request,
        f"Appended event {result.version} to stream {data['stream']} "
        f"(message {result.message_id}).",
    )
    return redirect(_detail_url(info.name, "streams"))


def _set_frozen(frozen: bool) -> Handler:
    def handler(request: HttpRequest, store: MessageStore, info: TopicInfo):
        queue = _queue_from(request)
        if queue is None:
            return redirect(_detail_url(info.name, "queues"))
        try:
            changed = operations.set_frozen(request.user, info.name, queue, frozen)
        except StoreError as error:
            messages.error(request, str(error))
            return redirect(_detail_url(info.name, "queues"))
        back = _queue_url(info.name, queue)
        if not changed:
            state = "frozen" if frozen else "writable"
            messages.info(request, f"Queue {queue} is already {state}; nothing was changed.")
            return redirect(back)
        if frozen:
            text = f"Froze queue {queue}: it takes no new messages; reads go on."
        else:
            text = f"Unfroze queue {queue}: it takes new messages again."
        messages.success(request, text)
        return redirect(back)

    return handler


def _add_queues(request: HttpRequest, store: MessageStore, info: TopicInfo):
    form = AddQueuesForm(request.POST)
    if not form.is_valid():
        return {"add_form": form}
    count = form.cleaned_data["count"]
    try:
        changed = operations.add_queues(request.user, info.name, count)
    except StoreError as error:
        form.add_error("count", str(error))
        return {"add_form": form}
    messages.success(
        request, f"Added {count} queue{_s(count)}; {info.name} now has {changed.queues}."
    )
    return redirect(_detail_url(info.name, "queues"))


def _remove_queue(request: HttpRequest, store: MessageStore, info: TopicInfo):
    queue = _queue_from(request)
    if queue is None:
        return redirect(_detail_url(info.name, "queues"))
    try:
        changed = operations.remove_queue(request.user, info.name, queue)
    except StoreError as error:
        messages.error(request, str(error))
        return redirect(_detail_url(info.name, "queues"))
    messages.success(request, f"Removed queue {queue}; {info.name} now has {changed.queues}.")
    return redirect(_detail_url(info.name, "queues"))


def _delete_topic(request: HttpRequest, store: MessageStore, info: TopicInfo):
    form = DeleteTopicForm(request.POST, topic=info.name)
    if not form.is_valid():
        return {"delete_form": form}
    try:
        operations.delete_topic(request.user, info.name)
    except (StoreError, KeyError) as error:
        form.add_error(None, str(error))
        return {"delete_form": form}
    messages.success(request, f"Deleted topic {info.name}.")
    return redirect("topics:list")


def _defaults(store: MessageStore) -> dict:
    return {setting.name: setting.default(store.config) for setting in TOPIC_SETTINGS}


@dataclass(frozen=True)
class SettingRow:
    name: str
    label: str
    unit: str
    value: int | float
    own: int | None
    default: int | float


def _settings_rows(store: MessageStore, info: TopicInfo) -> list[SettingRow]:
    defaults = _defaults(store)
    return [
        SettingRow(
            s.name,
            s.label,
            s.unit,
            info.settings.get(s.name, defaults[s.name]),
            info.settings.get(s.name),
            defaults[s.name],
        )
        for s in TOPIC_SETTINGS
    ]


def _set_settings(request: HttpRequest, store: MessageStore, info: TopicInfo):
    form = TopicSettingsForm(request.POST, own=info.settings, defaults=_defaults(store))
    if not form.is_valid():
        return {"settings_form": form}
    try:
        outcome = operations.set_topic_settings(request.user, info.name, form.changes())
    except StoreError as error:
        form.add_error(None, str(error))
        return {"settings_form": form}
    changed = outcome["changed"]
    if not changed:
        messages.info(request, "The settings were already so; nothing was changed.")
    else:
        shown = "; ".join(
            f"{name} {_setting_text(was)} → {_setting_text(now)}"
            for name, (was, now) in changed.items()
        )
        messages.success(request, f"Saved the settings of {info.name}: {shown}.")
    return redirect(_detail_url(info.name, "settings"))


def _setting_text(value: int | None) -> str:
    return "store default" if value is None else f"{value:,}"


#: POST ``action`` → handler; what each needs (produce or manage on the topic) is in
#: console/accounts/permissions.py's table.
ACTIONS: dict[str, Handler] = {
    "send": _send_message,
    "append": _append_event,
    "freeze": _set_frozen(True),
    "unfreeze": _set_frozen(False),
    "add_queues": _add_queues,
    "remove_queue": _remove_queue,
    "delete": _delete_topic,
    "settings": _set_settings,
}
