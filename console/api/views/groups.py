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
    GroupDetailSerializer,
    GroupSerializer,
    HistoryEntrySerializer,
)
from console.api.serializers import QuerySerializer, validated
from console.core.store import get_store
from console.groups.detail import filter_groups, group_detail, group_rows
from console.monitoring import scale
from console.operations import groups as operations
from console.operations.groups import require_group
from storeadapter.summaries import group_summaries

# ------------------------------------------------------------------- serializers


class GroupListQuery(QuerySerializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=200)
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)


class GroupDetailQuery(QuerySerializer):
    topic = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="A big topic whose page ``queue_page`` of queues to list.",
    )
    queue_page = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)


class HistoryQuery(QuerySerializer):
    topic = serializers.CharField(required=False, allow_blank=True, max_length=200)
    queue = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


# ------------------------------------------------------------------------ views


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
        return Response(GroupDetailSerializer(detail).data)

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
        return paginator.get_paginated_response(HistoryEntrySerializer(page, many=True).data)


urlpatterns = [
    path("groups/", GroupList.as_view(), name="api-groups"),
    path("groups/<name:group>/", GroupDetail.as_view(), name="api-group"),
    path("groups/<name:group>/history/", GroupHistory.as_view(), name="api-group-history"),
]
