"""API: the audit log, read-only, newest first, with the console page's filters."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api.errors import ApiError
from console.api.pagination import Pagination, paginated
from console.api.rules import Rule
from console.api.serializers import BoundedDateField, QuerySerializer
from console.audit.forms import AuditFilterForm
from console.audit.models import AuditEntry
from console.audit.visibility import visible_entries


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "created_at", "username", "action", "target", "before", "after"]
        fields += ["detail", "link"]


class AuditQuery(QuerySerializer):
    action = serializers.CharField(required=False, allow_blank=True, max_length=64)
    user = serializers.CharField(required=False, allow_blank=True, max_length=150)
    target = serializers.CharField(required=False, allow_blank=True, max_length=200)
    date_from = BoundedDateField(required=False)
    date_to = BoundedDateField(required=False)

    cross_field_rules = (
        Rule.not_before("date_from", "date_to", message="The end date is before the start date."),
    )


class AuditList(APIView):
    @extend_schema(
        parameters=[AuditQuery],
        responses={200: paginated(AuditEntrySerializer)},
    )
    def get(self, request: Request) -> Response:
        query = AuditQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        form = AuditFilterForm(query.validated_data)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            raise ApiError(400, "invalid", f"{field}: {errors[0]}", {"fields": form.errors})
        paginator = Pagination()
        page = paginator.paginate_queryset(
            form.filter(visible_entries(request.user, AuditEntry.objects.all())), request, self
        )
        return paginator.get_paginated_response(AuditEntrySerializer(page, many=True).data)


urlpatterns = [path("audit/", AuditList.as_view(), name="api-audit")]
