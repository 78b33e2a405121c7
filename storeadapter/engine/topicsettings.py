"""Per-topic settings, in one table: what each is, its bounds and unit, the store-wide
default it overrides.

A topic's settings are kept in its ``topics.json`` entry (``settings``: only the ones
set; docs/FORMAT.md): a topic without one, and every topic of a store written before
settings existed, uses the store's ``StoreConfig`` value. The engine honours each:
``retention_hours`` in ``delete_expired`` (upkeep.py), ``max_message_bytes`` in appends
(writer.py), ``dedup_window_s`` in the dedup lookup (writer.py). The console's form, the
API's serializer and schema and the ``tidemark topic-settings`` flags are built from
``TOPIC_SETTINGS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import StoreConfig
from .errors import StoreError, StoreFormatError


class InvalidSettingError(StoreError):
    """A topic setting that is not known, or a value outside its bounds."""


@dataclass(frozen=True)
class TopicSetting:
    #: The name in topics.json, the API and ``StoreConfig`` (the store-wide default).
    name: str
    #: The console form's label.
    label: str
    unit: str
    #: Inclusive bounds of a value (whole numbers).
    low: int
    high: int
    #: One sentence for the form, the API's schema and the command line.
    help: str

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default(self, config: StoreConfig) -> int | float:
        """The store-wide value a topic without this setting uses."""
        return getattr(config, self.name)

    @staticmethod
    def show(value: int | float) -> str:
        """A value as a person reads it: whole numbers with thousands separators."""
        return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"

    def check(self, value: object) -> int:
        """``value`` if it is a whole number within bounds, else InvalidSettingError."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidSettingError(
                f"{self.name} is a whole number of {self.unit}, not {value!r}"
            )
        if not self.low <= value <= self.high:
            raise InvalidSettingError(
                f"{self.name} is {self.low:,} to {self.high:,} {self.unit}, not {value:,}"
            )
        return value


TOPIC_SETTINGS: tuple[TopicSetting, ...] = (
    TopicSetting(
        "retention_hours",
        "Retention",
        "hours",
        1,
        87_600,
        "How long the topic's messages are kept. Shorter than the store's: its queues "
        "start past older messages at the next retention run; longer: the commit-log "
        "segments holding its messages are kept (unless the disk is past its limit).",
    ),
    TopicSetting(
        "max_message_bytes",
        "Maximum message size",
        "bytes",
        1,
        1 << 30,
        "The largest body an append to the topic takes (a message must also fit in a "
        "commit-log segment); a larger one is refused with MessageTooLargeError.",
    ),
    TopicSetting(
        "dedup_window_s",
        "Dedup window",
        "seconds",
        0,
        30 * 86_400,
        "How far back an append with a dedup id looks for a message stored under the same "
        "id (0: no dedup).",
    ),
)
SETTINGS_BY_NAME: dict[str, TopicSetting] = {s.name: s for s in TOPIC_SETTINGS}


def check_changes(changes: Mapping[str, object]) -> dict[str, int | None]:
    """``changes`` (name → value, None to go back to the store's default) checked."""
    if not isinstance(changes, Mapping):
        raise InvalidSettingError("settings are given as a mapping of name to value")
    checked: dict[str, int | None] = {}
    for name, value in changes.items():
        setting = SETTINGS_BY_NAME.get(name)  # type: ignore[arg-type]
        if setting is None:
            raise InvalidSettingError(
                f"a topic has no setting {name!r}; its settings are {', '.join(SETTINGS_BY_NAME)}"
            )
        checked[name] = None if value is None else setting.check(value)
    return checked


def settings_from_json(value: object, topic: object) -> dict[str, int]:
    """A ``topics.json`` entry's ``settings`` (absent: none); StoreFormatError if damaged."""
    if value is None:
        return {}
    try:
        if not isinstance(value, dict):
            raise InvalidSettingError("not a JSON object")
        checked = check_changes(value)
        if None in checked.values():
            raise InvalidSettingError("a setting is null")
    except InvalidSettingError as error:
        raise StoreFormatError(
            f"topics.json has settings for topic {topic!r} this engine cannot take: {error}"
        ) from None
    return checked  # type: ignore[return-value]


def effective(settings: Mapping[str, int], config: StoreConfig) -> dict[str, int | float]:
    """Every setting's value for a topic with ``settings``: its own, else the store's."""
    return {s.name: settings.get(s.name, s.default(config)) for s in TOPIC_SETTINGS}
