"""API: event streams of stream topics.

- ``/api/v1/streams/<topic>/<stream_id>/events/`` (also without the last slash):
  GET a stream's events from ``from_version`` on, at most ``limit`` (viewer); POST
  events to it, all or none, with ``expected_version`` and ``command_id`` (operator, as
  for sending messages). A version conflict is 409 ``wrong_expected_version`` with the
  stream's ``current_version``; a command id already used in the stream is 409
  ``duplicate_command`` with the ``version`` it produced.

Appending events is data traffic, like producing messages: not written to the audit log.
"""

from __future__ import annotations

from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.roles import OPERATOR
from console.api.errors import ApiError
from console.api.names import PATH_NAME_PATTERN
from console.api.read_models import AppendedSerializer, StreamEventsSerializer
from console.api.serializers import (
    ENCODED_BODY,
    ErrorSerializer,
    QuerySerializer,
    StrictSerializer,
    decode_body,
    refusals,
    validated,
)
from console.api.views.messages import STORE_DOWN, TextField
from console.core.store import get_store
from console.streams.reading import EventsAppended, StreamPage
from storeadapter.engine import DuplicateCommandError, WrongExpectedVersionError

#: The most events one GET returns, and how many when not asked.
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
#: The most events one POST appends.
MAX_EVENTS = 1000


#: The topic in the path as the schema says it: the name of a topic a person creates (the
#: URL's pattern also takes a group's %RETRY%/%DLQ% topics, never stream topics).
TOPIC = OpenApiParameter("topic", str, OpenApiParameter.PATH, pattern=PATH_NAME_PATTERN)


class EventsQuery(QuerySerializer):
    from_version = serializers.IntegerField(
        required=False, min_value=1, max_value=0xFFFFFFFF, default=1,
        help_text="The first version to return (default 1; the oldest kept if retention "
        "deleted it).",
    )  # fmt: skip
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT
    )


class NewEvent(StrictSerializer):
    body = TextField(allow_blank=True, help_text="The body: text, or base64 with encoding.")
    encoding = serializers.ChoiceField(
        choices=[("text", "UTF-8 text"), ("base64", "base64 of any bytes")], default="text"
    )
    event_type = TextField(required=False, allow_null=True, help_text="The event's type (tag).")

    body_constraints = (ENCODED_BODY,)

    def validate(self, data: dict) -> dict:
        return decode_body(data)


class AppendEvents(StrictSerializer):
    events = serializers.ListField(
        child=NewEvent(), min_length=1, max_length=MAX_EVENTS,
        help_text="Stored all or none, at the stream's next versions, in this order.",
    )  # fmt: skip
    expected_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=0xFFFFFFFF, default=None,
        help_text="The stream's version the events follow (0: a new stream); null: any.",
    )  # fmt: skip
    command_id = TextField(
        required=False, allow_null=True, default=None,
        help_text="Refused (409 duplicate_command) if already used in this stream.",
    )  # fmt: skip


CONFLICT = {
    409: OpenApiResponse(
        ErrorSerializer,
        description="wrong_expected_version (details.current_version: where the stream "
        "is) or duplicate_command (details.version: what the command produced).",
    )
}


class StreamEvents(APIView):
    """GET a stream's events in version order; POST events to it."""

    method_roles = {"POST": OPERATOR}

    @extend_schema(
        parameters=[TOPIC, EventsQuery],
        responses={
            200: StreamEventsSerializer,
            **refusals((409, "wrong_topic_kind: the topic is not a stream topic.")),
        },
    )
    def get(self, request: Request, topic: str, stream_id: str) -> Response:
        query = validated(EventsQuery, request.query_params)
        events = get_store().read_stream(topic, stream_id, query["from_version"], query["limit"])
        return Response(StreamEventsSerializer(StreamPage.of(topic, stream_id, events)).data)

    @extend_schema(
        parameters=[TOPIC],
        request=AppendEvents,
        responses={201: AppendedSerializer, **CONFLICT, **STORE_DOWN},
    )
    def post(self, request: Request, topic: str, stream_id: str) -> Response:
        data = request.data
        given = data.get("events") if isinstance(data, dict) else None
        if isinstance(given, list) and len(given) > MAX_EVENTS:
            raise ApiError(
                400,
                "batch_too_large",
                f"An append holds at most {MAX_EVENTS} events, not {len(given)}.",
                {"max_events": MAX_EVENTS},
            )
        append = validated(AppendEvents, data)
        events = [{"body": e["body"], "event_type": e.get("event_type")} for e in append["events"]]
        try:
            results = get_store().append_events(
                topic,
                stream_id,
                events,
                expected_version=append["expected_version"],
                command_id=append["command_id"],
            )
        except WrongExpectedVersionError as error:
            raise ApiError(
                409,
                "wrong_expected_version",
                str(error),
                {
                    "current_version": error.current_version,
                    "expected_version": error.expected_version,
                },
            ) from None
        except DuplicateCommandError as error:
            raise ApiError(
                409,
                "duplicate_command",
                str(error),
                {"version": error.version, "first_version": error.first_version},
            ) from None
        return Response(
            AppendedSerializer(EventsAppended.of(results)).data, status=status.HTTP_201_CREATED
        )


#: (The path's topic is documented as TOPIC says: its regex takes %RETRY% names too.)
#: A stream id in a URL is any text but a slash-free "events" end; the engine checks it.
urlpatterns = [
    re_path(
        r"^streams/(?P<topic>[A-Za-z0-9._%-]{1,140})/(?P<stream_id>.+)/events/?$",
        StreamEvents.as_view(),
        name="api-stream-events",
    ),
]
