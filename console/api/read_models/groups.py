"""Consumer groups: the list's rows, a queue's lag, a group's queues and metrics, offset
changes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.groups.detail import BigTopic, GroupDetail, GroupRow, LagRow
from console.monitoring.metrics import GROUP_STATUSES, QUEUE_STATUSES, GroupMetrics
from storeadapter.offset_reset import describe_reason
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


class ReasonLabelField(serializers.CharField):
    """A history reason for people (``describe_reason``): ``reset to earliest``, ..."""

    def to_representation(self, value: str) -> str:
        return describe_reason(value)[0]


class ReasonResetIdField(serializers.IntegerField):
    """The id of the applied reset a history reason names (``describe_reason``), or None."""

    def to_representation(self, value: str) -> int | None:
        return describe_reason(value)[1]


class HistoryEntrySerializer(OffsetChangeSerializer):
    """An offset change in the group's history, with its reason in words."""

    label = ReasonLabelField(source="reason", allow_blank=True, help_text="The reason, for people.")
    reset_id = ReasonResetIdField(
        source="reason",
        allow_null=True,
        help_text="The applied reset this change was part of (resets/<id>/); null for a "
        "consumer's commit.",
    )


# A member is the engine's ``group_members`` dict: its fields are listed.
class MemberQueueSerializer(serializers.Serializer):
    """A queue a member holds (a ``[topic, queue]`` pair of its heartbeat)."""

    topic = serializers.CharField()
    queue = serializers.IntegerField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        topic, queue = instance
        return {"topic": topic, "queue": int(queue)}


class GroupMemberSerializer(serializers.Serializer):
    """A live member of the group, as its last heartbeat says."""

    consumer_id = serializers.CharField()
    pid = serializers.IntegerField()
    host = serializers.CharField(allow_blank=True)
    topics = serializers.ListField(child=serializers.CharField())
    queues = MemberQueueSerializer(many=True)
    started_ms = serializers.IntegerField()
    heartbeat_ms = serializers.IntegerField()
    heartbeat_age_ms = serializers.IntegerField()


class BigTopicLagSerializer(DataclassSerializer):
    """A big topic of the group: its lag from the sampler, and which page of its queues
    the answer lists."""

    lag = serializers.IntegerField(
        source="sampled.lag", allow_null=True, help_text="From the sampler; null: not yet."
    )
    queues_behind = serializers.IntegerField(source="sampled.queues_behind", allow_null=True)
    sampled_ms = serializers.IntegerField(
        source="sampled.sampled_ms", allow_null=True, help_text="The sample's time."
    )
    queues = serializers.IntegerField(
        source="page.paginator.count", help_text="The topic's queues."
    )
    queue_page = serializers.IntegerField(
        source="page.number", help_text="The page of its queues in ``queues``."
    )
    queue_pages = serializers.IntegerField(source="page.paginator.num_pages")

    class Meta:
        dataclass = BigTopic
        ref_name = "BigTopicLag"
        fields = ("topic", "lag", "queues_behind", "sampled_ms", "queues", "queue_page")
        fields += ("queue_pages",)


class GroupDetailSerializer(DataclassSerializer):
    """A group: its lag per queue with owners and last commits, its big topics, its live
    members, whether it has a DLQ, its latest metrics."""

    lag = serializers.IntegerField()
    lost = serializers.IntegerField(
        source="summary.lost",
        help_text="Of its lag, the messages retention deleted before the group consumed "
        "them (queues read now; a big topic's are in its sampled metrics).",
    )
    topics = serializers.ListField(child=serializers.CharField(), source="summary.topics")
    big_topics = BigTopicLagSerializer(
        many=True,
        source="big_topic_list",
        help_text="Topics with too many queues to read per request: their lag is the "
        "sampler's and ``queues`` holds one page of theirs (``?topic=&queue_page=``).",
    )
    queues = GroupQueueSerializer(
        many=True,
        source="rows",
        help_text="Every queue of its topics; of a big topic (see big_topics), one page.",
    )
    members = GroupMemberSerializer(many=True)
    status = serializers.ChoiceField(
        choices=list(GROUP_STATUSES), source="metrics.status", allow_null=True
    )
    metrics = GroupMetricsSerializer(allow_null=True, help_text="null before the first sample.")

    class Meta:
        dataclass = GroupDetail
        ref_name = "GroupDetail"
        fields = ("group", "lag", "lost", "topics", "big_topics", "queues", "members")
        fields += ("has_dlq", "status", "metrics")
        extra_kwargs = {
            "has_dlq": {"help_text": "Whether the group has a DLQ topic.", "required": True}
        }
