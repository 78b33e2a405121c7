"""API: the store's storage — segments, disk use and thresholds, retention, last recovery."""

from __future__ import annotations

from dataclasses import asdict

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.core.store import get_store
from console.storage.visibility import visible_retention
from storeadapter.disk_use import disk_use
from storeadapter.summaries import segment_rows


class SegmentSerializer(serializers.Serializer):
    name = serializers.CharField()
    base = serializers.IntegerField()
    size = serializers.IntegerField()
    disk_bytes = serializers.IntegerField()
    used_bytes = serializers.IntegerField()
    first_store_ms = serializers.IntegerField(allow_null=True)
    last_store_ms = serializers.IntegerField(allow_null=True)
    expires_at_ms = serializers.IntegerField(allow_null=True)


class ThresholdsSerializer(serializers.Serializer):
    warn_ratio = serializers.FloatField()
    force_ratio = serializers.FloatField()
    reject_ratio = serializers.FloatField()


class StorageSerializer(serializers.Serializer):
    path = serializers.CharField()
    store_id = serializers.CharField()
    flush_mode = serializers.CharField()
    segment_bytes = serializers.IntegerField()
    segment_count = serializers.IntegerField()
    disk_bytes = serializers.IntegerField()
    disk_ratio = serializers.FloatField()
    disk_thresholds = ThresholdsSerializer()
    retention_hours = serializers.FloatField()
    last_flush_ms = serializers.IntegerField(allow_null=True)
    commit_log = serializers.DictField(child=serializers.IntegerField())
    segments = SegmentSerializer(many=True)
    last_recovery = serializers.DictField(allow_null=True)
    last_retention = serializers.DictField(allow_null=True)
    corruptions = serializers.ListField(child=serializers.DictField())
    failed = serializers.CharField(allow_null=True)


class Storage(APIView):
    @extend_schema(responses={200: StorageSerializer})
    def get(self, request: Request) -> Response:
        store = get_store()
        stats = store.stats(topics=False)
        disk = disk_use(store)
        keys = (
            "path",
            "store_id",
            "flush_mode",
            "segment_bytes",
            "segment_count",
            "disk_bytes",
            "retention_hours",
            "last_flush_ms",
            "commit_log",
            "last_recovery",
            "last_retention",
            "corruptions",
            "failed",
        )
        data = {key: stats[key] for key in keys}
        data["last_retention"] = visible_retention(request.user, data["last_retention"])
        data["disk_ratio"] = round(disk.ratio, 4)
        data["disk_thresholds"] = {
            "warn_ratio": disk.warn_ratio,
            "force_ratio": disk.force_ratio,
            "reject_ratio": disk.reject_ratio,
        }
        data["segments"] = [asdict(row) for row in segment_rows(store)]
        return Response(data)


urlpatterns = [path("storage/", Storage.as_view(), name="api-storage")]
