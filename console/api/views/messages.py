"""API: messages: produce, consume (long polling), commit, read, search and export.

- ``/api/v1/topics/<topic>/messages/``: POST one message or a batch (operator).
- ``/api/v1/topics/<topic>/queues/<queue>/messages/``: GET pull, long polling (viewer).
- ``/api/v1/topics/<topic>/queues/<queue>/commit/``: POST a group's offset (operator).
- ``/api/v1/messages/``: GET a bounded, paged search: by key, queue range or time.
- ``/api/v1/messages/export/``: GET a queue range as JSON Lines.
- ``/api/v1/topics/<topic>/filter/export/``: GET every message a filter expression matches
  as JSON Lines (bounded as the export above is).
- ``/api/v1/topics/<topic>/filter/``: GET the messages a filter expression matches, within a
  scan budget, with a cursor to go on (viewer).
- ``/api/v1/messages/<id>/``: GET one message.

Producing and pulling are data traffic, not console changes: they are not written to the
audit log. A commit moves a group's offset, and is audited (``offset.commit``) as well as
journalled in the offsets journal. The search
logic is `console.messages.search`, shared with the console's search page.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.http import StreamingHttpResponse
from django.urls import path
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from console.accounts.permissions import READ, TOPIC, require
from console.accounts.roles import OPERATOR
from console.api import converters  # noqa: F401  (registers <name:...>)
from console.api.errors import ApiError
from console.api.long_polls import long_poll_slot
from console.api.names import NAME_PATTERN
from console.api.pagination import Pagination
from console.api.read_models import (
    AppendResultSerializer,
    Committed,
    CommittedSerializer,
    FilterSerializer,
    MessageConsumptionSerializer,
    StoredMessageSerializer,
)
from console.api.rules import Rule, check, value_check
from console.api.serializers import (
    ENCODED_BODY,
    QuerySerializer,
    StrictSerializer,
    decode_body,
    jsonl_export_schema,
    refusals,
    validated,
)
from console.audit.log import record
from console.audit.reads import note_count, note_streamed
from console.core.store import get_store
from console.messages import exports, search, tail
from console.messages.consumption import Consumption
from console.messages.time_queues import TimeSearchTooWide, time_queues
from console.messages.time_queues import widest as time_queues_widest
from storeadapter.engine import (
    CorruptRecordError,
    Message,
    filters,
    group_position,
)

#: The longest a pull waits for messages, in seconds.
MAX_WAIT_S = 30.0
#: The most messages one pull returns, and how many when not asked.
MAX_PULL = 1000
DEFAULT_PULL = 32
#: Times as milliseconds since the epoch: 1970-01-01 to the end of the year 9999.
MAX_TIME_MS = 253_402_300_799_999
TIME_BOUNDS = (
    ": milliseconds since the epoch or ISO 8601, from 1970-01-01T00:00:00Z (0) "
    "to 9999-12-31T23:59:59.999Z (253402300799999)"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: A message id, as the schema states it (the engine checks it: storeadapter message_id).
MESSAGE_ID_PATTERN = "^[0-9A-Fa-f]{24}$"

#: Besides the error statuses every operation documents (console.api.schema), a produce
#: may meet a failed store or a full disk.
STORE_DOWN = refusals(
    (503, "The store failed or is closed."), (507, "The disk is too full to write.")
)


# Fields


class TextField(serializers.CharField):
    """A JSON string, taken as it is: never a number turned into one, never trimmed.

    NUL characters are allowed (they are data); lone surrogates, which are not UTF-8,
    are refused by CharField.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


#: The times the schema promises TimeParameter takes (it takes any ISO 8601 time within
#: the bounds): milliseconds below 253,400,000,000,000, or a date (days 1 to 28 of a
#: month, so that every date the pattern allows exists) of 1980 to 8999 with an optional
#: time of day and offset (so that no offset takes it out of the bounds).
TIME_PATTERN = (
    r"^([0-9]{1,14}|[01][0-9]{14}|2[0-4][0-9]{13}|25[0-2][0-9]{12}|253[0-3][0-9]{11}"
    r"|(19[89][0-9]|[2-8][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    r"(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
    r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?)?)$"
)


@extend_schema_field(
    {
        "type": "string",
        "maxLength": 64,
        "pattern": TIME_PATTERN,
        "description": "Milliseconds since the epoch, or an ISO 8601 time "
        "(UTC when it names no offset), e.g. 2024-05-01T12:00:00Z; from "
        "1970-01-01T00:00:00Z (0) to 9999-12-31T23:59:59.999Z (253402300799999).",
    }
)
class TimeParameter(serializers.CharField):
    """A time in a query string: milliseconds since the epoch or ISO 8601; → int ms."""

    default_error_messages = {
        "time": "Enter milliseconds since the epoch or an ISO 8601 time "
        "(such as 2024-05-01T12:00:00Z), from 1970 on."
    }

    def to_internal_value(self, data: Any) -> int:
        text = super().to_internal_value(data).strip()
        if len(text) > 64:
            self.fail("time")
        if text.isdecimal() and text.isascii():
            ms = int(text)
        else:
            try:
                when = datetime.fromisoformat(text)
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                ms = (when - _EPOCH) // timedelta(milliseconds=1)
            except (ValueError, OverflowError):
                self.fail("time")
        if not 0 <= ms <= MAX_TIME_MS:
            self.fail("time")
        return ms


# Produce


#: What a message's property names are (OpenAPI 3.0 cannot say it: no propertyNames).
PROPERTY_NAMES = "A property name is not empty, and is UTF-8 text."


@value_check("property_names")
def _property_names(properties: Any) -> str | None:
    for name in properties if isinstance(properties, dict) else ():
        if not name:
            return ""  # the rule's sentence says it
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return f"{name!r} is not UTF-8 text."
    return None


@value_check("messages_property_names")
def _messages_property_names(messages: Any) -> str | None:
    for message in messages if isinstance(messages, list) else ():
        why = _property_names(message.get("properties")) if isinstance(message, dict) else None
        if why is not None:
            return why
    return None


class ProduceMessage(StrictSerializer):
    body = TextField(allow_blank=True, help_text="The body: text, or base64 with encoding.")
    encoding = serializers.ChoiceField(
        choices=[("text", "UTF-8 text"), ("base64", "base64 of any bytes")], default="text"
    )
    key = TextField(required=False, allow_null=True)
    keys = serializers.ListField(child=TextField(), required=False, allow_null=True)
    tag = TextField(required=False, allow_null=True)
    properties = serializers.DictField(child=TextField(), required=False, allow_null=True)
    dedup_id = TextField(required=False, allow_null=True)
    queue = serializers.IntegerField(required=False, allow_null=True, min_value=0)

    cross_field_rules = (
        Rule.at_most_one("key", "keys", message="Give key or keys, not both."),
        Rule.checked("properties", check="property_names", message=PROPERTY_NAMES),
    )
    body_constraints = (ENCODED_BODY,)

    def validate(self, data: dict) -> dict:
        return decode_body(data)


class ProduceBatch(StrictSerializer):
    messages = serializers.ListField(
        child=ProduceMessage(),
        min_length=1,
        help_text="At most TIDEMARK_API_MAX_BATCH (1000) messages, written all or none.",
    )

    # Each message checks its own (ProduceMessage): said here too, where a client reads it.
    cross_field_rules = (
        Rule.checked("messages", check="messages_property_names", message=PROPERTY_NAMES),
    )


ProduceRequest = PolymorphicProxySerializer(
    component_name="ProduceRequest",
    serializers=[ProduceMessage, ProduceBatch],
    resource_type_field_name=None,
)


class ProduceResponse(serializers.Serializer):
    results = AppendResultSerializer(many=True)


def _message(data: dict) -> Message:
    keys = data.get("keys")
    return Message(
        body=data["body"],
        key=keys if keys is not None else data.get("key"),
        tag=data.get("tag"),
        queue=data.get("queue"),
        properties=data.get("properties") or None,
        dedup_id=data.get("dedup_id"),
    )


class TopicMessages(APIView):
    """POST one message (``{"body": ...}``) or a batch (``{"messages": [...]}``)."""

    method_roles = {"POST": OPERATOR}

    @extend_schema(
        request=ProduceRequest,
        responses={201: ProduceResponse, **STORE_DOWN, **refusals((409, "The queue is frozen."))},
    )
    def post(self, request: Request, topic: str) -> Response:
        data = request.data  # a body past DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 (errors.py)
        if not isinstance(data, dict):
            raise ApiError(
                400,
                "invalid",
                'The body is a JSON object: one message ({"body": ...}) '
                'or a batch ({"messages": [...]}).',
            )
        store = get_store()
        if "messages" in data:
            limit = settings.TIDEMARK_API_MAX_BATCH
            given = data["messages"]
            if isinstance(given, list) and len(given) > limit:
                raise ApiError(
                    400,
                    "batch_too_large",
                    f"A batch holds at most {limit} messages, not {len(given)}; send it in parts.",
                    {"max_batch": limit},
                )
            batch = validated(ProduceBatch, data)["messages"]
            results = store.append_batch(topic, [_message(item) for item in batch])
        else:
            one = _message(validated(ProduceMessage, data))
            results = [
                store.append(
                    topic,
                    one.body,
                    key=one.key,
                    tag=one.tag,
                    queue=one.queue,
                    properties=one.properties,
                    dedup_id=one.dedup_id,
                )
            ]
        note_count(request, len(results))
        return Response(ProduceResponse({"results": results}).data, status=status.HTTP_201_CREATED)


# Consume and commit


class PullQuery(QuerySerializer):
    group = serializers.RegexField(
        NAME_PATTERN,
        max_length=140,
        required=False,
        help_text="Start from this group's committed offset (without offset).",
    )
    offset = serializers.IntegerField(
        required=False, min_value=0, help_text="Start here (default: the group's offset)."
    )
    max = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_PULL, default=DEFAULT_PULL
    )
    wait = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_WAIT_S,
        default=0,
        help_text="Seconds to wait for messages when there are none yet (long polling).",
    )

    cross_field_rules = (
        Rule.at_least_one(
            "offset", "group", message="Give offset, or group to start from its committed offset."
        ),
    )


class PullResponse(serializers.Serializer):
    messages = StoredMessageSerializer(many=True)
    next_offset = serializers.IntegerField(help_text="The offset to pull from next.")
    max_offset = serializers.IntegerField(help_text="The queue's end offset.")


def _poll_holder(request: Request) -> str:
    """Whose long polls a pull counts among: its token's, or its user's (a session)."""
    token = getattr(request.auth, "pk", None)
    return f"token:{token}" if token is not None else f"user:{request.user.pk}"


class QueueMessages(APIView):
    """GET pulls messages from one queue, waiting up to ``wait`` seconds for some.

    Pulling never commits: POST the offset to ``commit/`` when they are processed.
    """

    @extend_schema(
        parameters=[PullQuery],
        responses={
            200: PullResponse,
            **refusals((429, "Too many long polls waiting (for this token or the server).")),
        },
    )
    def get(self, request: Request, topic: str, queue: int) -> Response:
        query = validated(PullQuery, request.query_params)
        store = get_store()
        low, high = store.queue_range(topic, queue)
        start = query.get("offset")
        group = query.get("group") or ""
        if start is None:
            start = group_position(store.committed_offset(group, topic, queue), low)
        elif start > high:
            raise ApiError(
                400,
                "offset_out_of_range",
                f"Offset {start} is past the end of queue {queue} of {topic} "
                f"(its end offset is {high}).",
                {"min_offset": low, "max_offset": high},
            )
        if query["wait"] > 0:
            with long_poll_slot(_poll_holder(request), query["wait"]):
                messages = store.pull(
                    group, topic, queue, query["max"], timeout_s=query["wait"], offset=start
                )
        else:
            messages = store.pull(group, topic, queue, query["max"], offset=start)
        note_count(request, len(messages))
        low, high = store.queue_range(topic, queue)
        next_offset = messages[-1].queue_offset + 1 if messages else max(start, low)
        return Response(
            PullResponse(
                {"messages": messages, "next_offset": next_offset, "max_offset": high}
            ).data
        )


class CommitRequest(StrictSerializer):
    group = serializers.RegexField(NAME_PATTERN, max_length=140)
    offset = serializers.IntegerField(help_text="The next offset to consume: 0 to the queue's end.")
    expected = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="Commit only if the group's offset is still this (null: never committed).",
    )


class QueueCommit(APIView):
    """POST a consumer group's offset on one queue (409 when ``expected`` is not met)."""

    method_roles = {"POST": OPERATOR}

    @extend_schema(
        request=CommitRequest,
        responses={
            200: CommittedSerializer,
            **refusals((409, "The committed offset is not the expected one.")),
        },
    )
    def post(self, request: Request, topic: str, queue: int) -> Response:
        data = validated(CommitRequest, request.data)
        store = get_store()
        low, high = store.queue_range(topic, queue)
        group, offset = data["group"], data["offset"]
        if not 0 <= offset <= high:
            raise ApiError(
                400,
                "offset_out_of_range",
                f"Offset {offset} is outside queue {queue} of {topic}: "
                f"commit 0 to its end offset, {high}.",
                {"min_offset": low, "max_offset": high},
            )
        options = {"expected": data["expected"]} if "expected" in data else {}
        change = store.commit_offset(
            group,
            topic,
            queue,
            offset,
            who=request.user.get_username(),
            reason="api commit",
            **options,
        )
        if change is not None:
            record(
                request.user,
                "offset.commit",
                f"group {group} on {topic} queue {queue}",
                before={"offset": change.old},
                after={"offset": offset},
                detail="committed through the API",
            )
        previous = offset if change is None else change.old
        return Response(CommittedSerializer(Committed(group, topic, queue, offset, previous)).data)


# Read, search and export


class MessageDetail(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "message_id",
                {"type": "string", "pattern": MESSAGE_ID_PATTERN},
                OpenApiParameter.PATH,
                description="24 hex digits, as a produce answers.",
            )
        ],
        responses={200: StoredMessageSerializer, **refusals((400, "That is not a message id."))},
    )
    def get(self, request: Request, message_id: str) -> Response:
        try:
            message = get_store().get(message_id)
        except CorruptRecordError as error:
            raise ApiError(404, "message_corrupt", str(error)) from None
        require(request.user, TOPIC, message.topic, READ)
        note_count(request, 1)
        return Response(StoredMessageSerializer(message).data)


class MessageConsumption(APIView):
    """Was the message consumed by each group? From the committed offsets (instant): each
    group consuming its topic (that your roles may view), and its retry and DLQ copies."""

    @extend_schema(
        operation_id="v1_messages_consumption",
        parameters=[
            OpenApiParameter(
                "message_id",
                {"type": "string", "pattern": MESSAGE_ID_PATTERN},
                OpenApiParameter.PATH,
                description="24 hex digits, as a produce answers.",
            )
        ],
        responses={
            200: MessageConsumptionSerializer,
            **refusals((400, "That is not a message id.")),
        },
    )
    def get(self, request: Request, message_id: str) -> Response:
        try:
            message = get_store().get(message_id)
        except CorruptRecordError as error:
            raise ApiError(404, "message_corrupt", str(error)) from None
        require(request.user, TOPIC, message.topic, READ)
        consumption = Consumption.of(request.user, message)
        return Response(MessageConsumptionSerializer(consumption).data)


MODE_KEY, MODE_RANGE, MODE_TIME = "key", "range", "time"
RANGE_FIELDS = ("queue", "from_offset", "to_offset")
TIME_FIELDS = ("since", "until")
OFFSETS_IN_ORDER = "to_offset is not before from_offset."


def _whole(value: Any, default: int) -> int | None:
    """A paging parameter as a number (``default`` when not given; None when not one)."""
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def search_reach(data: dict) -> int | None:
    """How many messages the search of ``data`` reaches (by key or by time), or None (a
    queue range: no bound)."""
    if any(data.get(name) is not None for name in RANGE_FIELDS):
        return None
    return search.KEY_MAX if data.get("key") is not None else search.TIME_MAX


@check("search_depth")
def _search_depth(data: dict, fields: tuple[str, ...]) -> dict[str, str]:
    reach = search_reach(data)
    number = _whole(data.get("page"), 1)
    size = _whole(data.get("page_size"), Pagination.page_size)
    if reach is None or number is None or size is None or number < 1 or size < 1:
        return {}
    if (number - 1) * min(size, Pagination.max_page_size) < reach:
        return {}
    return {"page": ""}


SEARCH_DEPTH = Rule.checked(
    "page",
    "page_size",
    check="search_depth",
    message=f"A search by key or by time reaches its first {search.KEY_MAX:,} messages only: "
    f"(page − 1) × page_size ({Pagination.page_size} by default, at most "
    f"{Pagination.max_page_size}) is below {search.KEY_MAX:,}; narrow it with since and until.",
)


class MessageSearchQuery(QuerySerializer):
    """Exactly one search: topic+key (since/until optional), topic+queue (from_offset/
    to_offset optional), or topic+since/until."""

    topic = serializers.RegexField(
        NAME_PATTERN,
        max_length=140,
        error_messages={
            "required": "Name a topic, and search it by key, by queue (queue, from_offset, "
            "to_offset) or by time (since, until)."
        },
    )
    key = TextField(required=False, max_length=1000, help_text="Messages with this key.")
    queue = serializers.IntegerField(required=False, min_value=0)
    from_offset = serializers.IntegerField(
        required=False, min_value=0, help_text="With queue: the first offset (included)."
    )
    to_offset = serializers.IntegerField(
        required=False, min_value=0, help_text="With queue: the last offset (not included)."
    )
    since = TimeParameter(required=False, help_text=f"Stored at or after this time{TIME_BOUNDS}.")
    until = TimeParameter(required=False, help_text=f"Stored at or before this time{TIME_BOUNDS}.")
    first_queue = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="With since/until: the first queue searched (included); a topic of more "
        "queues than one search by time reads needs first_queue and last_queue.",
    )
    last_queue = serializers.IntegerField(
        required=False, min_value=0, help_text="With since/until: the last queue (included)."
    )

    cross_field_rules = (
        Rule.at_most_one(
            "key",
            RANGE_FIELDS,
            message="Search by key or by queue range, not both: leave out key, or queue, "
            "from_offset and to_offset.",
        ),
        Rule.at_most_one(
            RANGE_FIELDS,
            TIME_FIELDS,
            message="A queue range search takes offsets, not times: leave out since and "
            "until, or search by time without queue, from_offset and to_offset.",
        ),
        Rule.at_least_one(
            "key",
            *RANGE_FIELDS,
            *TIME_FIELDS,
            message="Say what to search for: key, queue (with from_offset and to_offset), "
            "or since and until.",
        ),
        Rule.requires(
            ("first_queue", "last_queue"),
            TIME_FIELDS,
            message="first_queue and last_queue bound a search by time: give since or "
            "until, or leave them out.",
        ),
        Rule.requires(
            ("from_offset", "to_offset"),
            ("queue",),
            message="from_offset and to_offset are offsets of a queue: name it.",
        ),
        Rule.not_before("since", "until", message="until is not before since."),
        Rule.not_before("from_offset", "to_offset", message=OFFSETS_IN_ORDER),
        SEARCH_DEPTH,
    )

    def validate(self, data: dict) -> dict:
        by_key = "key" in data
        by_range = any(name in data for name in RANGE_FIELDS)
        data["mode"] = MODE_KEY if by_key else MODE_RANGE if by_range else MODE_TIME
        return data


class MessagePageSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        allow_null=True, help_text="Messages found in all; null when not known."
    )
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = StoredMessageSerializer(many=True)


PAGING = [
    OpenApiParameter(
        "page", {"type": "integer", "minimum": 1}, description="A page number, from 1."
    ),
    OpenApiParameter(
        "page_size",
        {"type": "integer", "minimum": 1},
        description="Messages per page, from 1 (default 50; more than 500 is 500).",
    ),
]


def _paging(request: Request) -> tuple[int, int]:
    """(page number, page size) from the query string, as every list takes them."""
    pagination = Pagination()
    return pagination.page_number(request), pagination.get_page_size(request)


def _search(store: Any, query: dict, number: int, size: int) -> tuple[list, int | None, bool]:
    """(messages of the page, total or None, whether there is a next page)."""
    topic, mode = query["topic"], query["mode"]
    deep = SEARCH_DEPTH.broken_by({**query, "page": number, "page_size": size})
    if deep:
        said = [{"message": SEARCH_DEPTH.message, "code": "invalid"}]
        raise ApiError(
            400,
            "search_too_deep",
            SEARCH_DEPTH.message,
            {"max_messages": search_reach(query), "fields": dict.fromkeys(deep, said)},
        )
    if mode == MODE_KEY:
        found = search.key_page(
            store, topic, query["key"], query.get("since"), query.get("until"), number, size
        )
        return found.messages, found.total, found.has_next
    if mode == MODE_TIME:
        try:
            queues = time_queues(
                topic, store.topic(topic).queues, query.get("first_queue"), query.get("last_queue")
            )
        except TimeSearchTooWide as error:
            raise ApiError(
                400, "search_too_wide", str(error), {"max_queues": time_queues_widest()}
            ) from None
        found = search.time_page(
            store, topic, query.get("since"), query.get("until"), number, size, queues
        )
        return found.messages, found.total, found.has_next
    queue = query["queue"]
    span = search.range_span(store, topic, queue, query.get("from_offset"), query.get("to_offset"))
    first = span.first + (number - 1) * size
    offsets = range(min(first, span.last), min(first + size, span.last))
    return search.read_span(store, topic, queue, offsets), span.count, offsets.stop < span.last


class MessageSearch(APIView):
    """GET a page of a bounded search (exactly one of three):

    - ``topic`` + ``key`` (``since``/``until`` optional): newest first, the newest 10,000;
    - ``topic`` + ``queue`` (``from_offset``/``to_offset`` optional): by offset, clamped
      to what the queue holds;
    - ``topic`` + ``since`` and/or ``until``: every queue merged, oldest first, the first
      10,000.

    ``count`` is null when the search cannot know it without reading further.
    """

    @extend_schema(
        operation_id="v1_messages_search",
        parameters=[MessageSearchQuery, *PAGING],
        responses={200: MessagePageSerializer, **refusals((404, "No such topic."))},
    )
    def get(self, request: Request) -> Response:
        query = validated(MessageSearchQuery, request.query_params)
        number, size = _paging(request)
        messages, total, has_next = _search(get_store(), query, number, size)
        note_count(request, len(messages))
        if number > 1 and not messages:
            raise exceptions.NotFound(f"Page {number} is past the last page of these results.")
        url = request.build_absolute_uri()
        previous = None
        if number > 1:
            previous = (
                remove_query_param(url, "page")
                if number == 2
                else replace_query_param(url, "page", number - 1)
            )
        return Response(
            MessagePageSerializer(
                {
                    "count": total,
                    "next": replace_query_param(url, "page", number + 1) if has_next else None,
                    "previous": previous,
                    "results": messages,
                }
            ).data
        )


#: An export's budget, as every export query takes it (DRF copies a declared field for
#: each serializer it makes, so one declaration serves both queries).
EXPORT_MAX_RECORDS = serializers.IntegerField(
    required=False,
    min_value=1,
    max_value=exports.MAX_RECORDS,
    help_text=f"Messages at most (default {exports.DEFAULT_RECORDS:,}).",
)
EXPORT_MAX_SECONDS = serializers.IntegerField(
    required=False,
    min_value=1,
    max_value=exports.MAX_SECONDS,
    help_text=f"Seconds of reading at most (default {exports.DEFAULT_SECONDS}).",
)


class ExportQuery(MessageSearchQuery):
    """The search to export (as ``/api/v1/messages/`` takes it) and the export's budget."""

    skip = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=exports.MAX_SKIP,
        help_text="Leave out this many messages at the start of the result set: what a "
        "continued export's last line gives.",
    )
    max_records = EXPORT_MAX_RECORDS
    max_seconds = EXPORT_MAX_SECONDS

    cross_field_rules = tuple(
        rule for rule in MessageSearchQuery.cross_field_rules if rule is not SEARCH_DEPTH
    )


#: The API's names for where an export goes on.
EXPORT_NAMES = {"from": "from_offset"}


class JSONLinesRenderer(BaseRenderer):
    """``application/x-ndjson``: lets a client ask for the export by its type (instead of
    a 406). Only content negotiation sees it: errors are still JSON (see MessageExport)."""

    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context=None):
        return JSONRenderer().render(data)


class MessageExport(APIView):
    """GET a search's result set as JSON Lines (console.messages.exports), exactly one
    search as ``/api/v1/messages/`` takes it: by key (newest first), a queue range, or by
    time (oldest first). Bounded by ``max_records`` and ``max_seconds``; the last line is
    ``{"export": {"complete", "messages", "stopped_by", "next", "continue"}}``: how far it
    got and, when not complete, the URL that exports the rest."""

    renderer_classes = [JSONRenderer, JSONLinesRenderer]

    def perform_content_negotiation(self, request: Request, force: bool = False):
        """The export streams JSON Lines itself; an error answers in the one JSON shape,
        even when the client asked for JSON Lines."""
        renderer, media_type = super().perform_content_negotiation(request, force)
        if isinstance(renderer, JSONLinesRenderer):
            return JSONRenderer(), JSONRenderer.media_type
        return renderer, media_type

    @staticmethod
    def budget(request: Request, query: dict) -> exports.Budget:
        """The export's bound from ``max_records`` and ``max_seconds`` (or the defaults),
        each streamed line noted for the read audit."""
        return exports.Budget(
            query.get("max_records") or exports.DEFAULT_RECORDS,
            query.get("max_seconds") or exports.DEFAULT_SECONDS,
            partial(note_streamed, request),
        )

    @staticmethod
    def continuation(request: Request, names: dict[str, str] | None = None) -> exports.Continuation:
        """How the last line says to go on: this path with the query asked (but ``format``)."""
        asked = {k: v for k, v in request.query_params.items() if k != "format"}
        return exports.Continuation(request.path, asked, names or {})

    @staticmethod
    def streamed(lines, filename: str) -> StreamingHttpResponse:
        """The JSON Lines streamed as an attachment named ``filename``."""
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    @jsonl_export_schema(ExportQuery, "message", (404, "No such topic or queue."))
    def get(self, request: Request) -> StreamingHttpResponse:
        query = validated(ExportQuery, request.query_params)
        store = get_store()
        topic, mode = query["topic"], query["mode"]
        budget = self.budget(request, query)
        skip = query.get("skip") or 0
        then = self.continuation(request, EXPORT_NAMES)
        since, until = query.get("since"), query.get("until")
        if mode == MODE_KEY:
            store.topic(topic)
            lines = exports.key_export(store, topic, query["key"], since, until, skip, budget, then)
            name = exports.filename(topic, "key")
        elif mode == MODE_TIME:
            try:
                queues = time_queues(
                    topic,
                    store.topic(topic).queues,
                    query.get("first_queue"),
                    query.get("last_queue"),
                )
            except TimeSearchTooWide as error:
                raise ApiError(
                    400, "search_too_wide", str(error), {"max_queues": time_queues_widest()}
                ) from None
            lines = exports.time_export(store, topic, since, until, queues, skip, budget, then)
            name = exports.filename(topic, "time")
        else:
            queue = query["queue"]
            span = search.range_span(
                store, topic, queue, query.get("from_offset"), query.get("to_offset")
            )
            first = min(span.first + skip, span.last)
            lines = exports.range_export(store, topic, queue, first, span.last, budget, then)
            name = search.export_filename(topic, queue, first, span.last)
        return self.streamed(lines, name)


#: What a filter expression must be (JSON Schema cannot say "compiles").
FILTER_EXPRESSION = "The expression must compile as CEL over a message's fields."


@value_check("filter_expression")
def _filter_expression(expression: Any) -> str | None:
    try:
        filters.compile_filter(str(expression))
    except filters.FilterSyntaxError as error:
        return f"{error}."
    return None


class CompilesFirst:
    """A query whose filter expression (the field ``expression_field``) must compile:
    its compile error answers before any other, saying where it goes wrong."""

    expression_field = "expression"

    def run_validators(self, value: Any) -> None:
        name = self.expression_field
        if isinstance(value, dict) and isinstance(value.get(name), str):
            try:
                filters.compile_filter(value[name])
            except filters.FilterSyntaxError as error:
                raise filter_error(error, name) from error
        super().run_validators(value)  # type: ignore[misc]


class FilterQuery(CompilesFirst, QuerySerializer):
    expression = serializers.CharField(
        max_length=filters.MAX_EXPRESSION,
        trim_whitespace=False,
        validators=[ProhibitNullCharactersValidator()],
        help_text="A CEL expression over a message's fields: topic, queue, offset, "
        "commit_offset, born_ms, stored_ms, tag, key, keys, properties, text (the body as "
        "text), body (the body parsed as JSON), body_size. E.g. body.order.total > 100 && "
        'tag == "paid".',
    )
    queues = serializers.RegexField(
        tail.QUEUES_PATTERN,
        max_length=tail.QUEUES_MAX_LENGTH,
        required=False,
        help_text="The queue ids to scan, comma-separated (default: every queue).",
    )
    cursor = serializers.RegexField(
        filters.CURSOR_PATTERN,
        max_length=30,
        required=False,
        help_text="Go on from here: the previous answer's cursor (queue:offset).",
    )
    max_records = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=filters.MAX_RECORDS,
        default=filters.DEFAULT_MAX_RECORDS,
        help_text="The most records this request looks at (its scan budget).",
    )
    max_seconds = serializers.FloatField(
        required=False,
        min_value=0.001,
        max_value=filters.MAX_SECONDS,
        default=filters.DEFAULT_MAX_SECONDS,
        help_text="About the longest this request scans (its time budget).",
    )
    max_matches = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=filters.MAX_MATCHES,
        default=filters.DEFAULT_MAX_MATCHES,
        help_text="The most matching messages one answer holds.",
    )

    cross_field_rules = (
        Rule.checked("expression", check="filter_expression", message=FILTER_EXPRESSION),
    )


def filter_error(error: filters.FilterSyntaxError, name: str = "expression") -> ApiError:
    """The 400 of an expression (the parameter ``name``) that does not compile: where it
    goes wrong (``position`` counts characters from 0; ``line`` and ``column`` from 1)."""
    sentence = f"{error}. {FILTER_EXPRESSION}"
    return ApiError(
        400,
        "invalid_filter",
        f"{name}: {sentence}",
        {
            "fields": {name: [sentence]},
            "position": error.position,
            "line": error.line,
            "column": error.column,
        },
    )


class TopicFilter(APIView):
    """GET the messages of a topic that a filter expression matches, scanned within a
    budget (records, seconds, matches); the answer's cursor goes on from where it
    stopped. The expression is evaluated by the engine's crate over the scan. An
    expression that does not compile is a 400 whose details give its position."""

    @extend_schema(
        parameters=[FilterQuery],
        responses={
            200: FilterSerializer,
            **refusals(
                (400, "The expression does not compile (details: position, line, column)."),
                (404, "No such topic or queue."),
            ),
        },
    )
    def get(self, request: Request, topic: str) -> Response:
        query = validated(FilterQuery, request.query_params)
        try:
            queues = tail.parse_queues(query.get("queues"))
        except tail.TailError as error:
            raise ApiError(400, "invalid", str(error)) from error
        try:
            result = filters.scan(
                get_store(),
                topic,
                query["expression"],
                queues=queues,
                cursor=query.get("cursor"),
                max_records=query["max_records"],
                max_seconds=query["max_seconds"],
                max_matches=query["max_matches"],
            )
        except filters.FilterSyntaxError as error:
            raise filter_error(error) from error
        note_count(request, len(result.messages))
        return Response(FilterSerializer(result).data)


class FilterExportQuery(FilterQuery):
    """The filter to export (as ``/api/v1/topics/<topic>/filter/`` takes it: expression,
    queues, cursor) and the export's budget."""

    max_records = EXPORT_MAX_RECORDS
    max_seconds = EXPORT_MAX_SECONDS
    max_matches = None


class TopicFilterExport(MessageExport):
    """GET every message of a topic that a filter expression matches as JSON Lines
    (console.messages.exports.filter_export), by queue and offset from ``cursor``.
    Bounded by ``max_records`` (messages exported) and ``max_seconds``; the last line is
    ``{"export": {"complete", "messages", "stopped_by", "next", "continue"}}``, ``next``
    being ``{"cursor": "queue:offset"}``. An expression that does not compile is a 400
    whose details give its position."""

    @jsonl_export_schema(
        FilterExportQuery,
        "matching message",
        (400, "The expression does not compile (details: position, line, column)."),
        (404, "No such topic or queue."),
    )
    def get(self, request: Request, topic: str) -> StreamingHttpResponse:
        query = validated(FilterExportQuery, request.query_params)
        try:
            queues = tail.parse_queues(query.get("queues"))
        except tail.TailError as error:
            raise ApiError(400, "invalid", str(error)) from error
        budget, then = self.budget(request, query), self.continuation(request)
        try:
            lines = exports.filter_export(
                get_store(), topic, query["expression"], queues, query.get("cursor"), budget, then
            )
        except filters.FilterSyntaxError as error:
            raise filter_error(error) from error
        return self.streamed(lines, exports.filename(topic, "filter"))


urlpatterns = [
    path("topics/<name:topic>/messages/", TopicMessages.as_view(), name="api-topic-messages"),
    path(
        "topics/<name:topic>/queues/<int:queue>/messages/",
        QueueMessages.as_view(),
        name="api-queue-messages",
    ),
    path(
        "topics/<name:topic>/queues/<int:queue>/commit/",
        QueueCommit.as_view(),
        name="api-queue-commit",
    ),
    path("topics/<name:topic>/filter/", TopicFilter.as_view(), name="api-topic-filter"),
    path(
        "topics/<name:topic>/filter/export/",
        TopicFilterExport.as_view(),
        name="api-topic-filter-export",
    ),
    path("messages/", MessageSearch.as_view(), name="api-messages"),
    path("messages/export/", MessageExport.as_view(), name="api-messages-export"),
    path("messages/<str:message_id>/", MessageDetail.as_view(), name="api-message"),
    path(
        "messages/<str:message_id>/consumption/",
        MessageConsumption.as_view(),
        name="api-message-consumption",
    ),
]
