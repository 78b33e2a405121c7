"""The store's settings from the environment: one table, read by the console, the workers
and the ``tidemark`` command alike.

Each row names an environment variable and the ``StoreConfig`` field it sets; its default
is the field's own. ``.env.example`` and docs/OPERATIONS.md list every row (a test checks
both against this table). An unset or empty variable leaves the field at its default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from storeadapter.engine import ConfigError, StoreConfig


@dataclass(frozen=True)
class StoreSetting:
    env: str
    field: str
    parse: Callable[[str], Any]
    meaning: str

    @property
    def default(self) -> Any:
        return _DEFAULTS[self.field]


STORE_SETTINGS: tuple[StoreSetting, ...] = (
    StoreSetting(
        "TIDEMARK_FLUSH_MODE",
        "flush_mode",
        str,
        "async (fsync every flush interval) or sync (an append returns once fsynced)",
    ),
    StoreSetting(
        "TIDEMARK_FLUSH_INTERVAL_MS",
        "flush_interval_ms",
        int,
        "async mode: milliseconds between the store's own fsyncs",
    ),
    StoreSetting(
        "TIDEMARK_LOG_CACHE_BEHIND_BYTES",
        "log_cache_behind_bytes",
        int,
        "a flush lets go of the log's synced page-cache pages this many bytes behind its "
        "tail (0: never; else at least 1048576)",
    ),
    StoreSetting(
        "TIDEMARK_SEGMENT_BYTES",
        "segment_bytes",
        int,
        "size of new commit-log segments in bytes (existing segments keep theirs)",
    ),
    StoreSetting(
        "TIDEMARK_MAX_MESSAGE_BYTES",
        "max_message_bytes",
        int,
        "largest message body accepted, in bytes",
    ),
    StoreSetting(
        "TIDEMARK_RETENTION_HOURS",
        "retention_hours",
        float,
        "hours a segment is kept after its newest message before retention deletes it",
    ),
    StoreSetting(
        "TIDEMARK_DISK_WARN_RATIO",
        "disk_warn_ratio",
        float,
        "disk use (0-1) from which retention deletes expired segments at once",
    ),
    StoreSetting(
        "TIDEMARK_DISK_FORCE_RATIO",
        "disk_force_ratio",
        float,
        "disk use (0-1) from which retention deletes segments before they expire",
    ),
    StoreSetting(
        "TIDEMARK_DISK_REJECT_RATIO",
        "disk_reject_ratio",
        float,
        "disk use (0-1) from which appends are refused",
    ),
    StoreSetting(
        "TIDEMARK_DEDUP_WINDOW_S",
        "dedup_window_s",
        int,
        "seconds within which a repeated dedup_id is stored once",
    ),
)

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(StoreConfig)}


class StoreSettingError(ValueError):
    """A store setting in the environment is not usable; the text names the variable."""


def store_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``StoreConfig`` fields the environment sets (unset and empty ones left out),
    checked together as the engine checks them."""
    environ = os.environ if environ is None else environ
    options: dict[str, Any] = {}
    for setting in STORE_SETTINGS:
        raw = (environ.get(setting.env) or "").strip()
        if not raw:
            continue
        try:
            options[setting.field] = setting.parse(raw)
        except ValueError:
            kind = "whole number" if setting.parse is int else "number"
            raise StoreSettingError(f"{setting.env}={raw!r} is not a {kind}.") from None
    try:
        StoreConfig(**options)
    except ConfigError as error:
        names = ", ".join(s.env for s in STORE_SETTINGS if s.field in options)
        raise StoreSettingError(f"The store settings ({names}) are refused: {error}.") from None
    return options
