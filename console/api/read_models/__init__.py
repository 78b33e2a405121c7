"""The read models' serializers: the API answers with them and the CLI's ``--json`` prints
them, so each shape is written once, by the dataclass the console already reads.

A ``DataclassSerializer`` (djangorestframework-dataclasses) takes its fields and their
types from the dataclass; what the type cannot say (a choice, a help text, a field the
answer leaves out, an API name that differs from the attribute's) is said here, and
drf-spectacular reads all of it into the schema. ``ref_name`` keeps the schema's
component names. This package has no views or URLs, so the CLI imports it without the
API's routes.

One module per resource; this package re-exports every serializer (and the fields the
others share) so that ``from console.api.read_models import X`` reads anywhere.
"""

from console.api.read_models.dlq import (
    CopySerializer,
    DeadMessageSerializer,
    DuplicateField,
    PlaceSerializer,
    PurgedSerializer,
    RedriveMarkSerializer,
    RedrivenSerializer,
    RedriveResultSerializer,
)
from console.api.read_models.fields import (
    APPEND_STATUSES,
    BodyBytesField,
    BodyEncodingField,
    BodyField,
    NumberField,
    StoreTimeField,
)
from console.api.read_models.groups import (
    BigTopicLagSerializer,
    GroupDetailSerializer,
    GroupMemberSerializer,
    GroupMetricsSerializer,
    GroupQueueSerializer,
    GroupSerializer,
    HistoryEntrySerializer,
    MemberQueueSerializer,
    OffsetChangeSerializer,
    QueueLagSerializer,
    ReasonLabelField,
    ReasonResetIdField,
)
from console.api.read_models.messages import (
    AppendResultSerializer,
    Committed,
    CommittedSerializer,
    FilterSerializer,
    GroupConsumptionSerializer,
    MessageConsumptionSerializer,
    MessageCopySerializer,
    StoredMessageSerializer,
    TailSerializer,
)
from console.api.read_models.resets import (
    AppliedResetDetailSerializer,
    AppliedResetSerializer,
    MovedQueueSerializer,
    PlanViewSerializer,
    QueueResetSerializer,
    ResetAppliedSerializer,
    ResetPlanSerializer,
    SelectedResetAppliedSerializer,
    SelectedResetPreviewSerializer,
)
from console.api.read_models.storage import (
    SegmentSerializer,
    StorageSerializer,
    ThresholdsSerializer,
)
from console.api.read_models.streams import (
    AppendedEventSerializer,
    AppendedSerializer,
    StoredEventSerializer,
    StreamEventsSerializer,
)
from console.api.read_models.topics import (
    ListedTopicSerializer,
    QueueActionResultSerializer,
    QueueSerializer,
    SettingNumber,
    SettingRowSerializer,
    TopicDeletedSerializer,
    TopicDetailSerializer,
    TopicsDeletedSerializer,
    TopicSerializer,
    TopicSettingsSerializer,
    setting_serializer,
)

__all__ = [
    "SelectedResetAppliedSerializer",
    "SelectedResetPreviewSerializer",
    "TopicDeletedSerializer",
    "TopicsDeletedSerializer",
    "APPEND_STATUSES",
    "AppendResultSerializer",
    "AppendedEventSerializer",
    "AppendedSerializer",
    "AppliedResetDetailSerializer",
    "AppliedResetSerializer",
    "BigTopicLagSerializer",
    "BodyBytesField",
    "BodyEncodingField",
    "BodyField",
    "Committed",
    "CommittedSerializer",
    "CopySerializer",
    "DeadMessageSerializer",
    "DuplicateField",
    "FilterSerializer",
    "GroupConsumptionSerializer",
    "GroupDetailSerializer",
    "GroupMemberSerializer",
    "GroupMetricsSerializer",
    "GroupQueueSerializer",
    "GroupSerializer",
    "HistoryEntrySerializer",
    "ListedTopicSerializer",
    "MemberQueueSerializer",
    "MessageConsumptionSerializer",
    "MessageCopySerializer",
    "MovedQueueSerializer",
    "NumberField",
    "OffsetChangeSerializer",
    "PlaceSerializer",
    "PlanViewSerializer",
    "PurgedSerializer",
    "QueueActionResultSerializer",
    "QueueLagSerializer",
    "QueueResetSerializer",
    "QueueSerializer",
    "ReasonLabelField",
    "ReasonResetIdField",
    "RedriveMarkSerializer",
    "RedriveResultSerializer",
    "RedrivenSerializer",
    "ResetAppliedSerializer",
    "ResetPlanSerializer",
    "SegmentSerializer",
    "SettingNumber",
    "SettingRowSerializer",
    "StorageSerializer",
    "StoreTimeField",
    "StoredEventSerializer",
    "StoredMessageSerializer",
    "StreamEventsSerializer",
    "TailSerializer",
    "ThresholdsSerializer",
    "TopicDetailSerializer",
    "TopicSerializer",
    "TopicSettingsSerializer",
    "setting_serializer",
]
