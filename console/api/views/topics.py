"""API: topics and their queues.

- ``/api/v1/topics/``: GET list (``q`` name contains, ``sort``; each topic with its kind,
  produce rate and size from the monitoring samples), POST create (admin).
- ``/api/v1/topics/<topic>/``: GET detail (with the first ``DETAIL_QUEUES`` queues),
  DELETE (admin).
- ``/api/v1/topics/<topic>/queues/``: GET list (paged: only the page's queues are read),
  POST add queues (admin).

A big topic (``console.monitoring.scale``: more queues than ``TIDEMARK_BIG_TOPIC_QUEUES``)
has its totals (messages, last write) from the latest sample, with ``sampled_ms`` (its
time) and ``sampled_queues`` (how many queues that sample read); a small topic's are read
live and those fields are null.
- ``/api/v1/topics/<topic>/queues/<queue>/``: GET one queue, DELETE remove it (admin).
- ``/api/v1/topics/<topic>/queues/<queue>/freeze/`` and ``unfreeze/``: POST (operator).
- ``/api/v1/topics/<topic>/settings/``: GET the topic's settings (each its value, the
  topic's own or null, the store's default), PATCH some of them (operator; null: back to
  the store's default), audited. Both built from the engine's table (TOPIC_SETTINGS).
- ``/api/v1/selected/topics/delete/``: POST (admin) ``{"topics": [...], "confirm": ...}``
  deletes the topics selected, as the topic list's "Delete selected…" does (its rule:
  console.topics.bulk): ``confirm`` is how many topics, or their names; a topic the user
  may not manage refuses the request whole (403), one not there too (404); then one
  deletion and one audit row per topic, the answer saying per topic whether it was
  deleted (or the sentence why not).
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.permissions import visible_topics
from console.accounts.roles import ADMIN, OPERATOR
from console.api.errors import ApiError
from console.api.names import NAME_PATTERN, PATH_NAME_PATTERN
from console.api.pagination import Pagination, paginated
from console.api.read_models import (
    ListedTopicSerializer,
    QueueActionResultSerializer,
    QueueSerializer,
    TopicDetailSerializer,
    TopicsDeletedSerializer,
    TopicSettingsSerializer,
)
from console.api.rules import Rule, check, only
from console.api.serializers import (
    QuerySerializer,
    StrictSerializer,
    not_blank_text,
    refusals,
    validated,
)
from console.core.store import get_store
from console.monitoring import current, scale
from console.operations import topics as operations
from console.topics import bulk
from console.topics.detail import QueueAction, queue_row, topic_detail, topic_settings
from console.topics.listing import DEFAULT_SORT, PAGE_SORTS, ListedTopic, search_and_sort
from console.topics.rates import topic_produce_rates, topic_sizes
from storeadapter.engine import (
    MAX_NAME_LENGTH,
    MAX_SHARED_QUEUES,
    TOPIC_SETTINGS,
    InvalidNameError,
    check_new_topic_name,
)
from storeadapter.summaries import QueueRowList, topic_summaries
from storeadapter.topic_kinds import CREATABLE_KIND_NAMES, PLAIN, kind_of


class TopicListQuery(QuerySerializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=200)
    sort = serializers.ChoiceField(choices=list(PAGE_SORTS), required=False, default=DEFAULT_SORT)


class TopicCreate(StrictSerializer):
    # The engine's rule (check_new_topic_name) says what is wrong with a name in a sentence;
    # the pattern is for the schema, and a name it refuses gets that sentence too.
    name = serializers.CharField(
        max_length=MAX_NAME_LENGTH,
        help_text="1 to 127 letters, digits, '.', '_' or '-'; not a group's %RETRY%/%DLQ% topic.",
    )
    queues = serializers.IntegerField(min_value=1, max_value=MAX_SHARED_QUEUES)
    # Text checked below, not an enum: the schema would name it KindEnum, as the alert
    # rules' kind, and warn.
    kind = serializers.CharField(
        default=PLAIN,
        help_text=f"One of {', '.join(CREATABLE_KIND_NAMES)}: plain (messages), or stream (the "
        "events of streams, appended with POST /api/v1/streams/<topic>/<stream id>/events/).",
    )

    body_constraints = (
        only("kind", *CREATABLE_KIND_NAMES),
        # The engine's rule for a name a person may create (check_new_topic_name).
        {"properties": {"name": {"pattern": PATH_NAME_PATTERN}}},
    )

    def validate_kind(self, value: str) -> str:
        if value not in CREATABLE_KIND_NAMES:
            raise serializers.ValidationError(
                f"A topic's kind is one of {', '.join(CREATABLE_KIND_NAMES)}, not {value!r}."
            )
        return value

    def validate_name(self, value: str) -> str:
        try:
            return check_new_topic_name(value)
        except InvalidNameError as error:
            raise serializers.ValidationError(str(error)) from None


class QueuesAdd(StrictSerializer):
    count = serializers.IntegerField(min_value=1, max_value=MAX_SHARED_QUEUES)


#: PATCH's body: some of a topic's settings; a number sets the topic's own value, null
#: puts it back to the store's default, a setting not given is left as it is.
TopicSettingsUpdate = type(
    "TopicSettingsUpdate",
    (StrictSerializer,),
    {
        "__module__": __name__,
        "__doc__": "Some of a topic's settings; null: back to the store's default.",
        **{
            s.name: serializers.IntegerField(
                required=False,
                allow_null=True,
                min_value=s.low,
                max_value=s.high,
                help_text=f"{s.help} In {s.unit}, {s.low:,} to {s.high:,}; null: the "
                "store's default.",
            )
            for s in TOPIC_SETTINGS
        },
    },
)


def _topic_detail(topic: str) -> dict:
    return TopicDetailSerializer(topic_detail(get_store(), topic)).data


def _settings(topic: str) -> dict:
    return TopicSettingsSerializer(topic_settings(get_store(), topic)).data


class TopicList(APIView):
    change_role = ADMIN

    @extend_schema(
        operation_id="topics_list",
        parameters=[TopicListQuery],
        responses={200: paginated(ListedTopicSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(TopicListQuery, request.query_params)
        store = get_store()
        kinds = {info.name: kind_of(info) for info in store.topics()}
        samples = current.latest_two()  # one look-up for both
        rates = topic_produce_rates(samples)
        sizes = topic_sizes(samples)
        topics = search_and_sort(
            [
                ListedTopic(
                    summary,
                    kinds.get(summary.name, PLAIN),
                    rates.get(summary.name),
                    sizes.get(summary.name),
                    sizes.state(summary.name),
                )
                for summary in topic_summaries(
                    store,
                    [t.name for t in visible_topics(request.user, store.topics())],
                    scale.SampledFigures(),
                )
            ],
            query.get("q", ""),
            query["sort"],
            PAGE_SORTS,
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(topics, request, view=self)
        return paginator.get_paginated_response(ListedTopicSerializer(page, many=True).data)

    @extend_schema(
        request=TopicCreate,
        responses={201: TopicDetailSerializer, **refusals((409, "A topic of that name exists."))},
    )
    def post(self, request: Request) -> Response:
        data = validated(TopicCreate, request.data)
        info = operations.create_topic(request.user, data["name"], data["queues"], data["kind"])
        return Response(_topic_detail(info.name), status=status.HTTP_201_CREATED)


class TopicDetail(APIView):
    change_role = ADMIN

    @extend_schema(responses={200: TopicDetailSerializer})
    def get(self, request: Request, topic: str) -> Response:
        return Response(_topic_detail(topic))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, topic: str) -> Response:
        operations.delete_topic(request.user, topic)
        return Response(status=status.HTTP_204_NO_CONTENT)


#: What the typed confirmation must be (a rule across fields: the schema lists it).
CONFIRM_SELECTED = "confirm is how many topics are selected, or their names; nothing was deleted."


@check("typed_confirmation")
def _typed_confirmation(data: dict, fields: tuple[str, ...]) -> dict[str, str]:
    """``confirm`` against the ``topics`` selected (console.topics.bulk.confirmed)."""
    names, typed = data.get("topics"), data.get("confirm")
    if not isinstance(names, list) or not isinstance(typed, str):
        return {}
    chosen = bulk.selection([name for name in names if isinstance(name, str)])
    if isinstance(chosen, str) or bulk.confirmed(typed, chosen):
        return {}
    return {"confirm": f"That is not {len(chosen)} nor the topics' names."}


class DeleteSelected(StrictSerializer):
    """The topics to delete, and the typed confirmation."""

    topics = serializers.ListField(
        child=serializers.RegexField(NAME_PATTERN, max_length=MAX_NAME_LENGTH),
        min_length=1,
        max_length=bulk.MAX_SELECTED,
        help_text=f"The topics' names, 1 to {bulk.MAX_SELECTED} (each once; in this order).",
    )
    confirm = not_blank_text(
        max_length=bulk.MAX_SELECTED * (MAX_NAME_LENGTH + 1),
        help_text="How many topics are selected, or their names (separated by commas or "
        "spaces, in any order): as the page asks.",
    )

    cross_field_rules = (
        Rule.checked("topics", "confirm", check="typed_confirmation", message=CONFIRM_SELECTED),
    )

    def validate_topics(self, value: list[str]) -> list[str]:
        chosen = bulk.selection(value)
        if isinstance(chosen, str):
            raise serializers.ValidationError(chosen)
        return chosen


class TopicsDeleteSelected(APIView):
    """Delete the selected topics (typed confirmation), each audited; per-topic results."""

    @extend_schema(
        request=DeleteSelected,
        responses={
            200: TopicsDeletedSerializer,
            **refusals(
                (400, "Not a selection, or confirm is not the count nor the names."),
                (404, "A topic selected is not there (nothing was deleted)."),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(DeleteSelected, request.data)
        chosen = data["topics"]
        not_allowed = bulk.refused(request.user, chosen)
        if not_allowed:
            raise ApiError(403, "permission_denied", bulk.refusal_sentence(not_allowed))
        gone = bulk.missing(get_store(), chosen)
        if gone:
            raise ApiError(404, "not_found", bulk.missing_sentence(gone), {"missing": gone})
        outcomes = bulk.delete_each(request.user, chosen)
        deleted = sum(1 for each in outcomes if each.deleted)
        answer = {"deleted": deleted, "failed": len(outcomes) - deleted, "results": outcomes}
        return Response(TopicsDeletedSerializer(answer).data)


class QueueList(APIView):
    change_role = ADMIN

    @extend_schema(operation_id="queues_list", responses={200: paginated(QueueSerializer)})
    def get(self, request: Request, topic: str) -> Response:
        store = get_store()
        rows = QueueRowList(store, store.topic(topic))
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(QueueSerializer(page, many=True).data)

    @extend_schema(request=QueuesAdd, responses={201: TopicDetailSerializer})
    def post(self, request: Request, topic: str) -> Response:
        data = validated(QueuesAdd, request.data)
        operations.add_queues(request.user, topic, data["count"])
        return Response(_topic_detail(topic), status=status.HTTP_201_CREATED)


class QueueDetail(APIView):
    change_role = ADMIN

    @extend_schema(responses={200: QueueSerializer})
    def get(self, request: Request, topic: str, queue: int) -> Response:
        return Response(QueueSerializer(queue_row(get_store(), topic, queue)).data)

    @extend_schema(
        responses={
            204: None,
            **refusals((409, "The queue is not frozen and fully consumed, or is the last.")),
        }
    )
    def delete(self, request: Request, topic: str, queue: int) -> Response:
        operations.remove_queue(request.user, topic, queue)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QueueFreeze(APIView):
    """POST freezes (or, for ``unfreeze/``, unfreezes) the queue; ``changed`` says whether
    it was not so already."""

    method_roles = {"POST": OPERATOR}
    frozen = True

    @extend_schema(request=None, responses={200: QueueActionResultSerializer})
    def post(self, request: Request, topic: str, queue: int) -> Response:
        changed = operations.set_frozen(request.user, topic, queue, self.frozen)
        row = queue_row(get_store(), topic, queue)
        return Response(QueueActionResultSerializer(QueueAction(row, changed)).data)


class QueueUnfreeze(QueueFreeze):
    frozen = False


class TopicSettings(APIView):
    method_roles = {"PATCH": OPERATOR}

    @extend_schema(operation_id="topic_settings_retrieve", responses={200: TopicSettingsSerializer})
    def get(self, request: Request, topic: str) -> Response:
        return Response(_settings(topic))

    @extend_schema(
        operation_id="topic_settings_update",
        request=TopicSettingsUpdate,
        responses={200: TopicSettingsSerializer},
    )
    def patch(self, request: Request, topic: str) -> Response:
        data = validated(TopicSettingsUpdate, request.data)
        operations.set_topic_settings(request.user, topic, dict(data))
        return Response(_settings(topic))


urlpatterns = [
    path("topics/", TopicList.as_view(), name="api-topics"),
    path(
        "selected/topics/delete/",
        TopicsDeleteSelected.as_view(),
        name="api-topics-delete-selected",
    ),
    path("topics/<name:topic>/", TopicDetail.as_view(), name="api-topic"),
    path("topics/<name:topic>/settings/", TopicSettings.as_view(), name="api-topic-settings"),
    path("topics/<name:topic>/queues/", QueueList.as_view(), name="api-queues"),
    path("topics/<name:topic>/queues/<int:queue>/", QueueDetail.as_view(), name="api-queue"),
    path(
        "topics/<name:topic>/queues/<int:queue>/freeze/",
        QueueFreeze.as_view(),
        name="api-queue-freeze",
    ),
    path(
        "topics/<name:topic>/queues/<int:queue>/unfreeze/",
        QueueUnfreeze.as_view(),
        name="api-queue-unfreeze",
    ),
]
