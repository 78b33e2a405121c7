"""The store's storage report: its segments and disk thresholds."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.fields import NumberField
from console.storage.report import StorageReport
from storeadapter.disk_use import DiskUse
from storeadapter.summaries import SegmentRow


class SegmentSerializer(DataclassSerializer):
    class Meta:
        dataclass = SegmentRow
        ref_name = "Segment"
        fields = ("name", "base", "size", "disk_bytes", "used_bytes", "first_store_ms")
        fields += ("last_store_ms", "expires_at_ms")


class ThresholdsSerializer(DataclassSerializer):
    warn_ratio = NumberField()
    force_ratio = NumberField()
    reject_ratio = NumberField()

    class Meta:
        dataclass = DiskUse
        ref_name = "Thresholds"
        fields = ("warn_ratio", "force_ratio", "reject_ratio")


class StorageSerializer(DataclassSerializer):
    retention_hours = NumberField()
    commit_log = serializers.DictField(child=serializers.IntegerField())
    last_recovery = serializers.DictField(allow_null=True)
    last_retention = serializers.DictField(allow_null=True)
    corruptions = serializers.ListField(child=serializers.DictField())
    disk_thresholds = ThresholdsSerializer()
    segments = SegmentSerializer(many=True)

    class Meta:
        dataclass = StorageReport
        ref_name = "Storage"
        fields = ("path", "store_id", "flush_mode", "segment_bytes", "segment_count")
        fields += ("disk_bytes", "retention_hours", "last_flush_ms", "commit_log")
        fields += ("last_recovery", "last_retention", "corruptions", "failed", "disk_ratio")
        fields += ("disk_thresholds", "segments")
