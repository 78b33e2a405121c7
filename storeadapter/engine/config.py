"""Store configuration: one frozen dataclass, validated on creation."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

FLUSH_MODES = ("async", "sync")
MIN_SEGMENT_BYTES = 4096
#: The least ``log_cache_behind_bytes`` other than 0 (a smaller distance is most likely
#: a unit mistake, and would send a reader a moment behind the tail to the disk).
MIN_LOG_CACHE_BEHIND_BYTES = 1 << 20


@dataclass(frozen=True)
class StoreConfig:
    """Tunable settings of a store; every field has a production default.

    ``segment_bytes`` applies to segments created from now on; existing segments keep
    their size. ``queue_file_entries`` is fixed when a store is created (store.json
    keeps it); later values are ignored for that store.
    """

    segment_bytes: int = 1 << 30
    flush_mode: str = "async"
    flush_interval_ms: int = 500
    #: ``async`` mode: how often the periodic flush also fsyncs shared topics' block
    #: files (the others flush the log, queue files and indexes). Until it does, the
    #: checkpoint's ``dispatched`` stays where the last such flush left it, and recovery
    #: re-dispatches the records past it (natively, ~1 µs a record). Every sync
    #: write-protects the pages it writes back, and the next store into each faults:
    #: at a million queues, with 500 ms, those faults and the syncs were two thirds of
    #: a put (docs/PERFORMANCE.md, mill33-s50).
    queue_flush_interval_ms: int = 5000
    flush_timeout_ms: int = 5000
    flush_dirty_bytes: int = 64 << 20
    #: A full flush lets go of the log's page-cache pages it made durable that lie more
    #: than this many bytes behind the tail (``POSIX_FADV_DONTNEED``; a page some
    #: process has mapped stays); 0, the default: never. The freed pages are the next
    #: ones the log's writes are made of, where a VM backs new pages on first touch
    #: (docs/PERFORMANCE.md, procs31-s55); a reader further behind reads from the disk.
    log_cache_behind_bytes: int = 0
    #: Sync mode: how long an appender starting a write group may wait for as many
    #: appenders as the last group had, so that one fsync covers them all (0: never).
    group_commit_wait_us: int = 200
    max_message_bytes: int = 4 << 20
    retention_hours: float = 72
    disk_warn_ratio: float = 0.75
    disk_force_ratio: float = 0.85
    disk_reject_ratio: float = 0.90
    dedup_window_s: int = 600
    queue_file_entries: int = 300_000
    #: Topics created with more queues than this keep them in shared block files (0:
    #: every topic).
    shared_layout_above: int = 1024
    #: A new shared topic's entries per block and blocks per file.
    shared_block_entries: int = 32
    shared_blocks_per_file: int = 65536
    max_open_queue_files: int = 1024
    index_slots: int = 5_000_000
    index_entries: int = 20_000_000
    #: Hash slots of a new stream topic's event index, per table (streams, commands):
    #: 4 bytes each, sparse. Lookups walk about (appends / slots) entries.
    stream_index_slots: int = 1 << 22
    #: Streams whose version and index position each process keeps in memory (the
    #: least recently appended to go first); about 600 bytes a stream.
    stream_cache_streams: int = 100_000

    def __post_init__(self) -> None:
        if self.flush_mode not in FLUSH_MODES:
            raise ConfigError(
                f"flush_mode must be one of {', '.join(FLUSH_MODES)}, not {self.flush_mode!r}"
            )
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ConfigError(
                f"segment_bytes must be at least {MIN_SEGMENT_BYTES}, not {self.segment_bytes}"
            )
        for name in (
            "flush_interval_ms",
            "queue_flush_interval_ms",
            "flush_timeout_ms",
            "flush_dirty_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.log_cache_behind_bytes and self.log_cache_behind_bytes < MIN_LOG_CACHE_BEHIND_BYTES:
            raise ConfigError(
                "log_cache_behind_bytes must be 0 (off) or at least "
                f"{MIN_LOG_CACHE_BEHIND_BYTES}, not {self.log_cache_behind_bytes}"
            )
        if not 0 <= self.group_commit_wait_us <= 100_000:
            raise ConfigError(
                "group_commit_wait_us must be between 0 and 100000, "
                f"not {self.group_commit_wait_us}"
            )
        if self.max_message_bytes <= 0:
            raise ConfigError(f"max_message_bytes must be positive, not {self.max_message_bytes}")
        if self.queue_file_entries <= 0:
            raise ConfigError(f"queue_file_entries must be positive, not {self.queue_file_entries}")
        for name in (
            "index_slots",
            "index_entries",
            "stream_index_slots",
            "stream_cache_streams",
            "max_open_queue_files",
            "shared_block_entries",
            "shared_blocks_per_file",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.stream_index_slots > 1 << 30:
            raise ConfigError(
                f"stream_index_slots must be at most {1 << 30}, not {self.stream_index_slots}"
            )
        if self.shared_layout_above < 0:
            raise ConfigError(
                f"shared_layout_above must not be negative, not {self.shared_layout_above}"
            )
        if self.retention_hours <= 0:
            raise ConfigError(f"retention_hours must be positive, not {self.retention_hours}")
        ratios = (self.disk_warn_ratio, self.disk_force_ratio, self.disk_reject_ratio)
        if not all(0 < r <= 1 for r in ratios) or not ratios[0] <= ratios[1] <= ratios[2]:
            raise ConfigError(
                "disk ratios must satisfy 0 < disk_warn_ratio <= disk_force_ratio "
                f"<= disk_reject_ratio <= 1, got {ratios}"
            )
        if self.dedup_window_s < 0:
            raise ConfigError(f"dedup_window_s must not be negative, not {self.dedup_window_s}")
