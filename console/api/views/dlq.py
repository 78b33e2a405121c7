"""API: a consumer group's dead letters (its ``%DLQ%<group>`` topic).

- ``/api/v1/groups/<group>/dlq/``: GET the dead messages, paged: each one is its latest
  copy in the DLQ, with the original message's place and every copy (a message redriven
  and failed again has several), each marked when it was redriven (when, by whom, where
  it went). DELETE (operator) with ``{"confirm": "<group>"}`` purges them (audited).
- ``/api/v1/groups/<group>/dlq/redrive/``: POST (operator) sends some (``message_ids``)
  or all (``all: true``: each dead message's latest copy not redriven yet) back to their
  topics; a letter redriven before is not sent again, and the answer counts it apart.

The listing, the redrive and the purge are the DLQ page's own (console.groups.dlq); the
redrive's and the purge's audit rows are written there and in console.operations.groups.
"""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.accounts.roles import OPERATOR
from console.api.errors import ApiError
from console.api.pagination import Pagination, paginated
from console.api.read_models import (
    DeadMessageSerializer,
    PurgedSerializer,
    RedriveResultSerializer,
)
from console.api.rules import only
from console.api.serializers import (
    StrictSerializer,
    refusals,
    validated,
)
from console.api.views.resets import BodySchema
from console.core.store import get_store
from console.groups import dlq
from console.groups.dlq import (
    MAX_REDRIVE_IDS,
    dead_messages,
    dlq_exists,
)
from console.operations.groups import GroupNotFoundError, Redriven

MESSAGE_ID_PATTERN = r"^[0-9A-Fa-f]{24}$"


class StrictStringList(serializers.ListField):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and any(not isinstance(item, str) for item in data):
            raise serializers.ValidationError("Message ids are strings.")
        return super().to_internal_value(data)


class RedriveSome(StrictSerializer):
    """Redrive the dead letters with these ids."""

    unknown_messages = {"all": "Send message_ids or all, not both."}

    message_ids = StrictStringList(
        child=serializers.RegexField(MESSAGE_ID_PATTERN),
        min_length=1,
        max_length=MAX_REDRIVE_IDS,
        help_text=f"1 to {MAX_REDRIVE_IDS} dead-letter ids; more at once is a redrive of all.",
    )


class RedriveAll(StrictSerializer):
    """Redrive every dead letter."""

    unknown_messages = {"message_ids": "Send message_ids or all, not both."}

    all = serializers.BooleanField(help_text="true")
    body_constraints = (only("all", True),)

    def validate_all(self, value: bool) -> bool:
        if not value:
            raise serializers.ValidationError(
                f"Send message_ids (1 to {MAX_REDRIVE_IDS} ids) or all: true to redrive "
                "every dead letter."
            )
        return value


def _redrive_request(data: Any) -> dict:
    if isinstance(data, dict) and "all" in data:
        return validated(RedriveAll, data)
    return validated(RedriveSome, data)


REDRIVE_REQUEST = PolymorphicProxySerializer(
    component_name="RedriveRequest",
    serializers=[RedriveSome, RedriveAll],
    resource_type_field_name=None,
)


class PurgeRequest(StrictSerializer):
    confirm = serializers.CharField(help_text="The group's name, to confirm.")


def _require_group_or_dlq(group: str) -> None:
    """A group that committed offsets, or has dead letters left from one."""
    store = get_store()
    if group not in store.groups() and not dlq_exists(store, group):
        raise GroupNotFoundError(f"there is no consumer group named {group!r}")


class GroupDlq(APIView):
    method_roles = {"DELETE": OPERATOR}
    #: DELETE reads {"confirm": "<group>"} (the schema documents it: RulesSchema).
    delete_reads_body = True

    @extend_schema(responses={200: paginated(DeadMessageSerializer)})
    def get(self, request: Request, group: str) -> Response:
        _require_group_or_dlq(group)
        listing = dead_messages(get_store(), group)
        paginator = Pagination()
        page = paginator.paginate_queryset(listing, request, view=self)
        return paginator.get_paginated_response(DeadMessageSerializer(page, many=True).data)

    @extend_schema(
        request=PurgeRequest,
        responses={200: PurgedSerializer},
        description="Delete every dead letter of the group (its DLQ topic); audited.",
    )
    def delete(self, request: Request, group: str) -> Response:
        data = validated(PurgeRequest, request.data)
        _require_group_or_dlq(group)
        if data["confirm"] != group:
            raise ApiError(
                400,
                "confirmation_mismatch",
                f"Send confirm: {group!r} (the group's name) to purge its dead letters; "
                "nothing was deleted.",
            )
        purged = dlq.purge(request.user, get_store(), group)
        return Response(PurgedSerializer(purged).data)


class GroupRedrive(APIView):
    """Send dead letters back to the topics they came from (each at most once)."""

    method_roles = {"POST": OPERATOR}
    schema = BodySchema()

    @extend_schema(
        request=REDRIVE_REQUEST,
        responses={
            200: RedriveResultSerializer,
            **refusals((507, "The disk is too full to write the letters back.")),
        },
    )
    def post(self, request: Request, group: str) -> Response:
        data = _redrive_request(request.data)
        _require_group_or_dlq(group)
        ids = list(dict.fromkeys(data["message_ids"])) if "message_ids" in data else None
        try:
            outcome = dlq.redrive(request.user, get_store(), group, ids)
        except dlq.NothingWaiting:
            outcome = Redriven([])
        return Response(RedriveResultSerializer(outcome).data)


urlpatterns = [
    path("groups/<name:group>/dlq/", GroupDlq.as_view(), name="api-group-dlq"),
    path("groups/<name:group>/dlq/redrive/", GroupRedrive.as_view(), name="api-group-dlq-redrive"),
]
