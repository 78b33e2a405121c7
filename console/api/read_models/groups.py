"""Consumer groups: the list's rows, a queue's lag, a group's queues and metrics, offset
changes."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.groups.detail import GroupRow, LagRow
from console.monitoring.metrics import GROUP_STATUSES, QUEUE_STATUSES, GroupMetrics
from storeadapter.summaries import GroupQueueLag


class GroupSerializer(DataclassSerializer):
    """A consumer group as the list shows it."""

    topics = serializers.ListField(child=serializers.CharField(), source="topic_names")
    status = serializers.ChoiceField(
        choices=list(GROUP_STATUSES),
        allow_null=True,
        help_text="Burrow-style status from the latest metrics sample; null before one.",
    )

    class Meta:
        dataclass = GroupRow
        ref_name = "Group"
        fields = ("group", "lag", "topics", "queues_behind", "members", "status")
        extra_kwargs = {
            "lag": {"help_text": "Messages behind, over all its queues."},
            "queues_behind": {"help_text": "Queues with a lag above 0."},
            "members": {"help_text": "Live members (heartbeat within 10 s)."},
        }


class QueueLagSerializer(DataclassSerializer):
    """A queue's lag as the store has it (``GroupQueueLag``): the rows of the CLI's
    ``tidemark lag --json``, whose fields are ``GroupQueue``'s first ones."""

    class Meta:
        dataclass = GroupQueueLag
        ref_name = "QueueLag"
        fields = ("topic", "queue", "committed", "max_offset", "lag", "lost")


class GroupQueueSerializer(DataclassSerializer):
    """One queue of the group: its lag, owner and last commit."""

    status = serializers.ChoiceField(
        choices=list(QUEUE_STATUSES), allow_null=True, help_text="From the latest sample."
    )

    class Meta:
        dataclass = LagRow
        ref_name = "GroupQueue"
        fields = ("topic", "queue", "committed", "max_offset", "lag", "owner")
        fields += ("last_commit_ms", "status", "lag_seconds", "lost")
        extra_kwargs = {
            "committed": {"help_text": "None: never committed."},
            "owner": {"help_text": "The live member holding it."},
            "lag_seconds": {"help_text": "From the latest sample.", "required": True},
            "lost": {
                "help_text": "Of its lag, the messages retention deleted before the group "
                "consumed them.",
                "required": True,
            },
        }


class GroupMetricsSerializer(DataclassSerializer):
    """The group's latest metrics sample."""

    status = serializers.ChoiceField(choices=list(GROUP_STATUSES))

    class Meta:
        dataclass = GroupMetrics
        ref_name = "GroupMetrics"
        fields = ("status", "sampled_ms", "lag_seconds", "consume_rate", "produce_rate")
        fields += ("drain_seconds", "expiry_risk_hours", "lost", "drain_state")
        extra_kwargs = {
            "consume_rate": {"help_text": "Messages per second."},
            "produce_rate": {"help_text": "Messages per second."},
            "drain_seconds": {"help_text": "null: never (not draining)."},
            "expiry_risk_hours": {
                "help_text": "Hours until retention deletes unconsumed messages; null: none."
            },
            "lost": {
                "help_text": "Of its lag, the messages retention deleted unconsumed (sampled).",
                "required": True,
            },
            "drain_state": {
                "help_text": "caught up, draining, not draining or not measured yet.",
                "required": True,
            },
        }


# The engine's ``OffsetChange`` is a named tuple, not a dataclass: its fields are listed.
class OffsetChangeSerializer(serializers.Serializer):
    """One change of a committed offset: ``old`` is null for a group's first commit."""

    topic = serializers.CharField()
    queue = serializers.IntegerField()
    old = serializers.IntegerField(allow_null=True)
    new = serializers.IntegerField()
    time_ms = serializers.IntegerField()
    who = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
