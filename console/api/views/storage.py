"""API: the store's storage — segments, disk use and thresholds, retention, last recovery."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api.read_models import StorageSerializer
from console.core.store import get_store
from console.storage.report import storage_report


class Storage(APIView):
    @extend_schema(responses={200: StorageSerializer})
    def get(self, request: Request) -> Response:
        return Response(StorageSerializer(storage_report(get_store(), request.user)).data)


urlpatterns = [path("storage/", Storage.as_view(), name="api-storage")]
