"""Offset resets: a preview's plan (kept under its token), an applied reset, the Resets
list and a reset's detail."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.groups import OffsetChangeSerializer
from console.groups.resets import KeptPlanView, MovedQueue, ResetDetail, ResetEntry
from console.operations.groups import ResetApplied
from storeadapter.offset_reset import PlanView, QueueReset
from storeadapter.reset_modes import MODE_NAMES, UNDO


class QueueResetSerializer(DataclassSerializer):
    """One queue of a reset's preview: where the group is on it and where it would go."""

    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()

    class Meta:
        dataclass = QueueReset
        ref_name = "QueueReset"
        fields = ("queue", "committed", "current", "target", "min_offset", "max_offset")
        fields += ("clamped", "span_from_ms", "span_to_ms", "planned", "consumed_again")
        fields += ("skipped",)
        extra_kwargs = {
            "committed": {"help_text": "None: never committed."},
            "current": {"help_text": "Where the group consumes from now."},
            "clamped": {
                "help_text": "Why the target was moved into the queue's range.",
                "required": True,
            },
            "span_from_ms": {"required": True},
            "span_to_ms": {"required": True},
            "planned": {
                "help_text": "False: the reset leaves this queue alone.",
                "required": True,
            },
        }


class PlanViewSerializer(DataclassSerializer):
    """A reset's plan: every queue's current offset and target, and the counts over every
    queue (the rows of ``tidemark reset-offsets --json``; the API's preview adds how to
    apply it)."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    value = serializers.JSONField(
        allow_null=True,
        help_text="time: ms; shift: N; offset: the offsets asked for; group: the source "
        "group; undo: the id of the reset undone.",
    )
    queues = QueueResetSerializer(
        many=True,
        help_text="Every queue of the topic; of a topic with more than 1,000 queues, the "
        "first 1,000 that move (listed_all false; the counts cover every queue).",
    )

    class Meta:
        dataclass = PlanView
        ref_name = "ResetPlanView"
        fields = ("group", "topic", "mode", "value", "queues", "past_newest", "span_from_ms")
        fields += ("span_to_ms", "queue_count", "listed_all", "changes", "consumed_again")
        fields += ("skipped", "clamped", "relative")
        extra_kwargs = {
            "past_newest": {
                "help_text": "time: queues the time is after the newest message of (there the "
                "same as latest)."
            },
            "span_from_ms": {"help_text": "Over the listed queues."},
            "span_to_ms": {"help_text": "Over the listed queues."},
            "queue_count": {"help_text": "Queues of the topic."},
            "listed_all": {"help_text": "Whether queues lists every queue."},
            "changes": {"help_text": "Queues whose offset would move now."},
            "clamped": {
                "help_text": "Queues whose target was moved into their range (of a big topic: "
                "of those that move)."
            },
            "relative": {
                "help_text": "True for a shift: applied from the offsets at the moment of applying."
            },
        }


class ResetPlanSerializer(PlanViewSerializer):
    """A reset's preview, kept under its token until it expires."""

    class Meta(PlanViewSerializer.Meta):
        dataclass = KeptPlanView
        ref_name = "ResetPlan"
        fields = PlanViewSerializer.Meta.fields[:10] + ("token",)
        fields += PlanViewSerializer.Meta.fields[10:] + ("live_members", "expires_ms")
        extra_kwargs = {
            **PlanViewSerializer.Meta.extra_kwargs,
            "token": {"help_text": "Apply with dry_run false and this as plan."},
            "live_members": {
                "help_text": "The group's live members: they continue from the new offsets."
            },
            "expires_ms": {"help_text": "Until when the preview can be applied."},
        }


class ResetAppliedSerializer(DataclassSerializer):
    """What applying a preview did: the queues moved, each with its real offset before."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    changes = OffsetChangeSerializer(
        many=True, help_text="The first 1,000 of them: old is each queue's real offset before."
    )

    class Meta:
        dataclass = ResetApplied
        ref_name = "ResetApplied"
        fields = ("reset_id", "group", "topic", "mode", "changed", "changes", "consumed_again")
        fields += ("skipped",)
        extra_kwargs = {
            "reset_id": {
                "help_text": "Its id in resets/ (undo: resets/<id>/undo/); null: no queue moved."
            },
            "changed": {"help_text": "Queues whose offset moved."},
        }


class AppliedResetSerializer(DataclassSerializer):
    """An applied reset or undo of the group."""

    mode = serializers.ChoiceField(choices=[*MODE_NAMES, UNDO])
    value = serializers.JSONField(allow_null=True, help_text="As in the preview.")

    class Meta:
        dataclass = ResetEntry
        ref_name = "AppliedReset"
        fields = ("id", "group", "topic", "mode", "value", "undoes", "undone_by", "who")
        fields += ("applied_ms", "moved", "consumed_again", "skipped")
        extra_kwargs = {
            "undoes": {"help_text": "An undo: the reset undone."},
            "undone_by": {"help_text": "The undos applied of this reset."},
            "who": {"allow_blank": True},
            "moved": {"help_text": "Queues whose offset moved."},
        }


class MovedQueueSerializer(DataclassSerializer):
    """A queue the reset moved."""

    class Meta:
        dataclass = MovedQueue
        ref_name = "MovedQueue"
        fields = ("queue", "before", "after")
        extra_kwargs = {"before": {"help_text": "None: never committed."}}


class AppliedResetDetailSerializer(AppliedResetSerializer):
    """An applied reset with each queue's offset before and after."""

    queues = MovedQueueSerializer(many=True, help_text="The first 1,000 queues moved.")

    class Meta(AppliedResetSerializer.Meta):
        dataclass = ResetDetail
        ref_name = "AppliedResetDetail"
        fields = AppliedResetSerializer.Meta.fields + ("queues", "listed_all")
        extra_kwargs = {
            **AppliedResetSerializer.Meta.extra_kwargs,
            "listed_all": {"help_text": "Whether queues lists every queue moved."},
        }


class SelectedResetPreviewSerializer(serializers.Serializer):
    """One preview of a reset of several groups to the same target: each group's plan,
    kept under its own token, and the totals."""

    topic = serializers.CharField()
    mode = serializers.ChoiceField(choices=list(MODE_NAMES))
    groups = serializers.IntegerField(help_text="Groups previewed.")
    moved = serializers.IntegerField(help_text="Queues that would move, over every group.")
    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()
    clamped = serializers.IntegerField()
    previews = ResetPlanSerializer(
        many=True, help_text="Each group's preview; apply them with their tokens."
    )


class GroupResetOutcomeSerializer(serializers.Serializer):
    """One group's part of applying the previews."""

    group = serializers.CharField()
    plan = serializers.CharField(help_text="The preview's token.")
    applied = serializers.BooleanField()
    reset_id = serializers.IntegerField(
        allow_null=True, help_text="The reset made; null when refused or nothing moved."
    )
    undo = serializers.CharField(
        allow_null=True, help_text="Where to preview its undo (POST); null without a reset."
    )
    changed = serializers.IntegerField(help_text="Queues whose offset moved.")
    consumed_again = serializers.IntegerField()
    skipped = serializers.IntegerField()
    error = serializers.CharField(
        allow_null=True, help_text="Why its offsets stay (a sentence); null when applied."
    )


class SelectedResetAppliedSerializer(serializers.Serializer):
    """What applying the previews did: one result per group, in the order sent."""

    applied = serializers.IntegerField(help_text="Previews applied.")
    failed = serializers.IntegerField(help_text="Previews refused (each says why).")
    results = GroupResetOutcomeSerializer(many=True)
