"""API: consumer groups, their lag and members, their offset history; deletion.

- ``/api/v1/groups/``: GET list (``q`` name contains, ``topic`` has offsets on it), most
  behind first.
- ``/api/v1/groups/<group>/``: GET lag per queue with owners and last commits, the live
  members; DELETE forgets the group (admin).
- ``/api/v1/groups/<group>/history/``: GET the offset changes, newest first.

Offset resets are in resets.py, dead letters in dlq.py. The figures are the group pages'
own (console.groups.detail); every change goes through console.operations.groups, which
writes the audit row.
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.permissions import visible_groups
from console.accounts.roles import ADMIN
from console.api.pagination import Pagination, paginated
from console.api.read_models import (
    GroupMetricsSerializer,
    GroupQueueSerializer,
    GroupSerializer,
    OffsetChangeSerializer,
)
from console.api.serializers import QuerySerializer, validated
from console.core.store import get_store
from console.groups.detail import filter_groups, group_detail, group_rows
from console.groups.dlq import dlq_exists
from console.monitoring import scale
from console.monitoring.metrics import GROUP_STATUSES
from console.operations import groups as operations
from console.operations.groups import require_group
from storeadapter.engine import OffsetChange
from storeadapter.offset_reset import describe_reason
from storeadapter.summaries import group_summaries

# ------------------------------------------------------------------- serializers


class GroupListQuery(QuerySerializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=200)
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)


class MemberQueueSerializer(serializers.Serializer):
    topic = serializers.CharField()
    queue = serializers.IntegerField()


class GroupMemberSerializer(serializers.Serializer):
    consumer_id = serializers.CharField()
    pid = serializers.IntegerField()
    host = serializers.CharField(allow_blank=True)
    topics = serializers.ListField(child=serializers.CharField())
    queues = MemberQueueSerializer(many=True)
    started_ms = serializers.IntegerField()
    heartbeat_ms = serializers.IntegerField()
    heartbeat_age_ms = serializers.IntegerField()


class BigTopicLagSerializer(serializers.Serializer):
    topic = serializers.CharField()
    lag = serializers.IntegerField(allow_null=True, help_text="From the sampler; null: not yet.")
    queues_behind = serializers.IntegerField(allow_null=True)
    sampled_ms = serializers.IntegerField(allow_null=True, help_text="The sample's time.")
    queues = serializers.IntegerField(help_text="The topic's queues.")
    queue_page = serializers.IntegerField(help_text="The page of its queues in ``queues``.")
    queue_pages = serializers.IntegerField()


class GroupDetailQuery(QuerySerializer):
    topic = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="A big topic whose page ``queue_page`` of queues to list.",
    )
    queue_page = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)


class GroupDetailSerializer(serializers.Serializer):
    group = serializers.CharField()
    lag = serializers.IntegerField()
    lost = serializers.IntegerField(
        help_text="Of its lag, the messages retention deleted before the group consumed "
        "them (queues read now; a big topic's are in its sampled metrics)."
    )
    topics = serializers.ListField(child=serializers.CharField())
    queues = GroupQueueSerializer(
        many=True,
        help_text="Every queue of its topics; of a big topic (see big_topics), one page.",
    )
    big_topics = BigTopicLagSerializer(
        many=True,
        help_text="Topics with too many queues to read per request: their lag is the "
        "sampler's and ``queues`` holds one page of theirs (``?topic=&queue_page=``).",
    )
    members = GroupMemberSerializer(many=True)
    has_dlq = serializers.BooleanField(help_text="Whether the group has a DLQ topic.")
    status = serializers.ChoiceField(choices=list(GROUP_STATUSES), allow_null=True)
    metrics = GroupMetricsSerializer(allow_null=True, help_text="null before the first sample.")


class HistoryEntrySerializer(OffsetChangeSerializer):
    """An offset change in the group's history, with its reason in words."""

    label = serializers.CharField(allow_blank=True, help_text="The reason, for people.")
    reset_id = serializers.IntegerField(
        allow_null=True,
        help_text="The applied reset this change was part of (resets/<id>/); null for a "
        "consumer's commit.",
    )


class HistoryQuery(QuerySerializer):
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)
    queue = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


# ------------------------------------------------------------------------ views


def _history_entry(change: OffsetChange) -> dict:
    label, reset_id = describe_reason(change.reason)
    return {**OffsetChangeSerializer(change).data, "label": label, "reset_id": reset_id}


class GroupList(APIView):
    @extend_schema(
        operation_id="v1_groups_list",
        parameters=[GroupListQuery],
        responses={200: paginated(GroupSerializer)},
    )
    def get(self, request: Request) -> Response:
        query = validated(GroupListQuery, request.query_params)
        store = get_store()
        summaries = filter_groups(
            visible_groups(
                request.user,
                group_summaries(store, with_queues=False, figures=scale.SampledFigures()),
            ),
            query.get("q", "").strip(),
            query.get("topic", "").strip(),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(summaries, request, view=self)
        return paginator.get_paginated_response(
            GroupSerializer(group_rows(store, page), many=True).data
        )


class GroupDetail(APIView):
    change_role = ADMIN

    @extend_schema(parameters=[GroupDetailQuery], responses={200: GroupDetailSerializer})
    def get(self, request: Request, group: str) -> Response:
        query = validated(GroupDetailQuery, request.query_params)
        require_group(group)
        store = get_store()
        detail = group_detail(store, group, {query.get("topic", ""): query.get("queue_page")})
        return Response(
            {
                "group": group,
                "lag": detail.lag,
                "lost": detail.summary.lost,
                "topics": list(detail.summary.topics),
                "big_topics": [
                    {
                        "topic": big.topic,
                        "lag": big.sampled.lag if big.sampled else None,
                        "queues_behind": big.sampled.queues_behind if big.sampled else None,
                        "sampled_ms": big.sampled.sampled_ms if big.sampled else None,
                        "queues": big.page.paginator.count,
                        "queue_page": big.page.number,
                        "queue_pages": big.page.paginator.num_pages,
                    }
                    for big in detail.big_topics.values()
                ],
                "queues": GroupQueueSerializer(detail.rows, many=True).data,
                "members": [
                    {
                        **member,
                        "queues": [{"topic": t, "queue": int(q)} for t, q in member["queues"]],
                    }
                    for member in detail.members
                ],
                "has_dlq": dlq_exists(store, group),
                "status": detail.metrics.status if detail.metrics else None,
                "metrics": (
                    GroupMetricsSerializer(detail.metrics).data if detail.metrics else None
                ),
            }
        )

    @extend_schema(responses={204: None})
    def delete(self, request: Request, group: str) -> Response:
        operations.delete_group(request.user, group)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupHistory(APIView):
    @extend_schema(
        parameters=[HistoryQuery],
        responses={200: paginated(HistoryEntrySerializer)},
    )
    def get(self, request: Request, group: str) -> Response:
        query = validated(HistoryQuery, request.query_params)
        require_group(group)
        store = get_store()
        everything = store.offset_history(group, limit=2**62)
        topic = query.get("topic", "")
        queue = query.get("queue")
        picked = [
            c
            for c in everything
            if (not topic or c.topic == topic) and (queue is None or c.queue == queue)
        ]
        paginator = Pagination()
        page = paginator.paginate_queryset(picked, request, view=self)
        return paginator.get_paginated_response([_history_entry(c) for c in page])


urlpatterns = [
    path("groups/", GroupList.as_view(), name="api-groups"),
    path("groups/<name:group>/", GroupDetail.as_view(), name="api-group"),
    path("groups/<name:group>/history/", GroupHistory.as_view(), name="api-group-history"),
]
