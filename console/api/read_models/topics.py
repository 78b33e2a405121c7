"""Topics: the list's rows, a topic's detail, its queues, a queue after a freeze, the
topic's settings (a serializer per setting of the engine's table, ``TOPIC_SETTINGS``)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework_dataclasses.serializers import DataclassSerializer

from console.api.read_models.fields import NumberField
from console.topics.bulk import Deleted
from console.topics.detail import DETAIL_QUEUES, QueueAction, SettingValue, TopicDetail
from console.topics.listing import ListedTopic
from storeadapter.engine import TOPIC_SETTINGS, TopicSetting
from storeadapter.summaries import QueueRow, TopicSummary
from storeadapter.topic_kinds import KIND_LABELS

# Text, not an enum: the schema would give it the same enum name as TopicCreate's kind.
KIND_HELP = f"One of {', '.join(KIND_LABELS)}: plain, stream, or a group's own retry or dlq topic."


class TopicSerializer(DataclassSerializer):
    """A topic's figures (``TopicSummary``): the first fields of a listed topic and of a
    topic's detail, whose read models read them through their summary."""

    class Meta:
        dataclass = TopicSummary
        ref_name = "Topic"
        fields = ("name", "queues", "frozen_queues", "messages", "last_write_ms", "created_ms")
        fields += ("sampled_ms",)
        extra_kwargs = {
            "sampled_ms": {
                "help_text": "A big topic's totals come from the sample at this time (0: not "
                "sampled yet); null when they were read live.",
                "required": True,
            }
        }


class _WithSummary(DataclassSerializer):
    """A read model that reads its summary's fields through (``ListedTopic``,
    ``TopicDetail``): the summary's fields first, then its own."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {**TopicSerializer().get_fields(), **super().get_fields()}


class ListedTopicSerializer(_WithSummary):
    """A topic as the list shows it."""

    kind = serializers.CharField(help_text=KIND_HELP)
    produce_rate = NumberField(
        allow_null=True,
        help_text="Messages appended per second over the monitoring's rate window; null "
        "before two samples.",
    )
    size_state = serializers.ChoiceField(
        choices=["known", "counting", "unsampled"],
        help_text="known; counting (the sampler has not counted every queue's existing "
        "records yet); unsampled (no sample has seen the topic yet).",
    )

    class Meta:
        dataclass = ListedTopic
        ref_name = "ListedTopic"
        fields = ("kind", "produce_rate", "size_bytes", "size_state")
        extra_kwargs = {
            "size_bytes": {
                "help_text": "Bytes of the records the topic holds (whole records), as of the "
                "latest sample; null while unknown (size_state says why).",
                "required": True,
            }
        }


class QueueSerializer(DataclassSerializer):
    """One queue of a topic."""

    class Meta:
        dataclass = QueueRow
        ref_name = "Queue"
        fields = ("queue", "min_offset", "max_offset", "messages", "frozen", "last_write_ms")


class TopicDetailSerializer(_WithSummary):
    """A topic with its layout and its first queues."""

    kind = serializers.CharField(help_text=KIND_HELP)
    layout = serializers.ChoiceField(choices=["files", "shared"])
    queue_list = QueueSerializer(
        many=True, help_text=f"The first {DETAIL_QUEUES} queues; queues/ pages through all."
    )

    class Meta:
        dataclass = TopicDetail
        ref_name = "TopicDetail"
        fields = ("kind", "layout", "sampled_queues", "queue_list")
        extra_kwargs = {
            "sampled_queues": {"help_text": "Queues the sample read (fewer when it rotates)."}
        }


class QueueActionResultSerializer(DataclassSerializer):
    """A queue after a freeze or unfreeze: its row, and whether the action changed it."""

    class Meta:
        dataclass = QueueAction
        ref_name = "QueueActionResult"
        fields = ("changed",)

    def get_fields(self) -> dict[str, serializers.Field]:
        return {**QueueSerializer().get_fields(), **super().get_fields()}


class SettingNumber(serializers.FloatField):
    """A number as the store has it: whole numbers as integers (a store-wide default,
    such as retention hours, may have a fraction)."""

    def to_representation(self, value: Any) -> int | float:
        return int(value) if float(value).is_integer() else float(value)


def setting_serializer(setting: TopicSetting) -> type[DataclassSerializer]:
    """The serializer of one setting's ``SettingValue`` (its bounds and unit in the
    schema), named for it: ``retention_hours`` → ``RetentionHoursSetting``."""
    name = "".join(part.title() for part in setting.name.split("_")) + "Setting"
    meta = type(
        "Meta",
        (),
        {
            "dataclass": SettingValue,
            "ref_name": name,
            "fields": ("value", "own", "default", "unit"),
            "extra_kwargs": {
                "own": {
                    "min_value": setting.low,
                    "max_value": setting.high,
                    "help_text": "The topic's own value; null: it uses the store's default.",
                }
            },
        },
    )
    return type(
        name,
        (DataclassSerializer,),
        {
            "__module__": __name__,
            "__doc__": setting.help,
            "Meta": meta,
            "value": SettingNumber(help_text=f"In force for the topic, in {setting.unit}."),
            "default": SettingNumber(help_text=f"The store's default, in {setting.unit}."),
        },
    )


#: A topic's settings (``TopicSettings``): ``topic``, and per setting of the table its
#: value, own and default.
TopicSettingsSerializer = type(
    "TopicSettingsSerializer",
    (serializers.Serializer,),
    {
        "__module__": __name__,
        "topic": serializers.CharField(),
        **{
            s.name: setting_serializer(s)(source=f"by_name.{s.name}", help_text=s.help)
            for s in TOPIC_SETTINGS
        },
    },
)


class SettingRowSerializer(DataclassSerializer):
    """A setting as ``tidemark topic-settings --json`` lists it: its name, then the
    fields the API gives each setting."""

    value = SettingNumber()
    default = SettingNumber()

    class Meta:
        dataclass = SettingValue
        ref_name = "SettingRow"
        fields = ("name", "value", "own", "default", "unit")


class TopicDeletedSerializer(DataclassSerializer):
    """One selected topic's outcome (``console.topics.bulk.Deleted``)."""

    class Meta:
        dataclass = Deleted
        ref_name = "TopicDeleted"
        fields = ("topic", "deleted", "messages", "error")
        extra_kwargs = {
            "messages": {"help_text": "Messages it held (a big topic: as last sampled)."},
            "error": {"help_text": "Why it was not deleted (a sentence); null when it was."},
        }


class TopicsDeletedSerializer(serializers.Serializer):
    """What deleting the selected topics did: one result per topic, in the order sent."""

    deleted = serializers.IntegerField(help_text="Topics deleted.")
    failed = serializers.IntegerField(help_text="Topics not deleted (each says why).")
    results = TopicDeletedSerializer(many=True)
