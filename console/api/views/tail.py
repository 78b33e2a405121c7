"""API: the live tail of a topic (issue 34, item 2), the console's tail page's source too.

- ``/api/v1/topics/<topic>/tail/``: GET the messages appended to the topic's queues (all,
  or ``queues``) past ``cursor`` (none: from now on), waiting up to ``wait`` seconds for
  some (long polling), at most ``rate`` a second; the answer's ``cursor`` is the next
  poll's, its ``dropped`` says how many messages the rate cap left out (viewer: reading
  the topic). ``filter``: only the messages a filter expression matches (item 1).

- ``/api/v1/topics/<topic>/tail/export/``: GET the tail's results from ``cursor`` (the
  tail's) up to the queues' ends now as JSON Lines (``queues`` and ``filter`` as the tail
  takes them), bounded as the other exports are; the last line says how far it got and
  the URL (with the tail cursor) that continues it (console.messages.exports).

Tailing only reads, from the offsets in the cursor: it never reads or moves a group's
committed offset. A poll that waits holds one of the long-poll slots that pulls hold
(console.api.long_polls): 429 with Retry-After past the caps. The logic is
``console.messages.tail``.
"""

from __future__ import annotations

from django.core.validators import ProhibitNullCharactersValidator
from django.http import StreamingHttpResponse
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api import converters  # noqa: F401  (registers <name:...>)
from console.api.errors import ApiError
from console.api.long_polls import long_poll_slot
from console.api.read_models import TailSerializer
from console.api.rules import Rule
from console.api.serializers import (
    QuerySerializer,
    jsonl_export_schema,
    refusals,
    validated,
)
from console.api.views.messages import (
    EXPORT_MAX_RECORDS,
    EXPORT_MAX_SECONDS,
    FILTER_EXPRESSION,
    CompilesFirst,
    MessageExport,
    filter_error,
)
from console.audit.reads import note_count
from console.core.store import get_store
from console.messages import exports, tail
from storeadapter.engine import filters


class TailQuery(CompilesFirst, QuerySerializer):
    expression_field = "filter"

    queues = serializers.RegexField(
        tail.QUEUES_PATTERN,
        max_length=tail.QUEUES_MAX_LENGTH,
        required=False,
        help_text="The queue ids to follow, comma-separated, such as 0,2 (default: every "
        "queue). A cursor's queues that are not followed are left out.",
    )
    cursor = serializers.RegexField(
        tail.CURSOR_PATTERN,
        max_length=tail.CURSOR_MAX_LENGTH,
        required=False,
        help_text="The previous answer's cursor (default: start at the queues' ends now). "
        "A queue it does not name starts at that queue's end; an offset past a queue's end "
        "is that end.",
    )
    wait = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=tail.MAX_WAIT_S,
        default=0,
        help_text="Seconds to wait for messages when none arrived past the cursor (long polling).",
    )
    rate = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=tail.MAX_RATE,
        default=tail.DEFAULT_RATE,
        help_text="The most messages a second the tail answers (a bucket of one second's "
        "worth). Past it the tail keeps the newest and counts the others in 'dropped'.",
    )
    filter = serializers.CharField(
        max_length=filters.MAX_EXPRESSION,
        required=False,
        trim_whitespace=False,
        validators=[ProhibitNullCharactersValidator()],
        help_text="Only the messages this filter expression matches (as "
        "/api/v1/topics/<topic>/filter/'s expression); the others are not counted as "
        "dropped.",
    )

    cross_field_rules = (
        Rule.checked("filter", check="filter_expression", message=FILTER_EXPRESSION),
    )


def _poll_holder(request: Request) -> str:
    """Whose long polls a tail counts among: its token's, or its user's (a session)."""
    token = getattr(request.auth, "pk", None)
    return f"token:{token}" if token is not None else f"user:{request.user.pk}"


class TopicTail(APIView):
    """GET the messages appended to a topic past a cursor, waiting up to ``wait`` seconds
    for some; never moves a group's offsets."""

    @extend_schema(
        parameters=[TailQuery],
        responses={
            200: TailSerializer,
            **refusals((429, "Too many long polls waiting (for this token or the server).")),
        },
    )
    def get(self, request: Request, topic: str) -> Response:
        query = validated(TailQuery, request.query_params)
        try:
            queues = tail.parse_queues(query.get("queues"))
            cursor = tail.Cursor.parse(query["cursor"]) if query.get("cursor") else None
        except tail.TailError as error:
            raise ApiError(400, "invalid", str(error)) from error
        expression = query.get("filter") or None
        store = get_store()
        # A topic or queue that does not exist is a 404 before any slot is held.
        followed = tail.followed_queues(store, topic, queues)
        if query["wait"] > 0:
            with long_poll_slot(_poll_holder(request), query["wait"]):
                answer = tail.poll(
                    store, topic, followed, cursor, query["rate"], query["wait"], expression
                )
        else:
            answer = tail.poll(store, topic, followed, cursor, query["rate"], 0.0, expression)
        note_count(request, len(answer.messages))
        return Response(TailSerializer(answer).data)


class TailExportQuery(TailQuery):
    """What the tail export takes: the tail's queues, cursor (required: where the tail
    stood) and filter, and the export's budget (no wait, no rate cap)."""

    cursor = serializers.RegexField(
        tail.CURSOR_PATTERN,
        max_length=tail.CURSOR_MAX_LENGTH,
        help_text="Where the export starts: a tail's cursor (the tail page's, or a tail "
        "answer's), such as 0:15,1:20@1732846200000; a continued export's last line gives "
        "the next. A queue it does not name starts at that queue's end.",
    )
    wait = None
    rate = None
    max_records = EXPORT_MAX_RECORDS
    max_seconds = EXPORT_MAX_SECONDS


class TopicTailExport(MessageExport):
    """GET the live tail's results as JSON Lines (console.messages.exports.tail_export):
    the messages appended past ``cursor`` up to the queues' ends now, in append order,
    only what ``filter`` matches when given. Bounded by ``max_records`` and
    ``max_seconds``; the last line is ``{"export": {"complete", "messages",
    "stopped_by", "next", "continue"}}``, ``next`` being ``{"cursor": <tail cursor>}``.
    Never moves a group's offsets."""

    @jsonl_export_schema(
        TailExportQuery,
        "message",
        (400, "The filter does not compile (details: position, line, column)."),
        (404, "No such topic or queue."),
    )
    def get(self, request: Request, topic: str) -> StreamingHttpResponse:
        query = validated(TailExportQuery, request.query_params)
        try:
            queues = tail.parse_queues(query.get("queues"))
            cursor = tail.Cursor.parse(query["cursor"])
        except tail.TailError as error:
            raise ApiError(400, "invalid", str(error)) from error
        budget, then = self.budget(request, query), self.continuation(request)
        try:
            lines = exports.tail_export(
                get_store(), topic, queues, cursor, query.get("filter") or None, budget, then
            )
        except filters.FilterSyntaxError as error:
            raise filter_error(error, "filter") from error
        return self.streamed(lines, exports.filename(topic, "tail"))


urlpatterns = [
    path("topics/<name:topic>/tail/", TopicTail.as_view(), name="api-topic-tail"),
    path(
        "topics/<name:topic>/tail/export/", TopicTailExport.as_view(), name="api-topic-tail-export"
    ),
]
