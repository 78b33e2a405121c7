"""What the crate (``native/``, built as ``storeadapter.engine._native``) offers: the
engine takes it through ``dataplane.py`` only, which checks ``INTERFACE`` at import.

Change this file with the crate's module (``native/src/python/``) and bump
``INTERFACE`` there and ``dataplane.NATIVE_INTERFACE`` here;
tests/engine/test_native_door.py holds the names to the module's.
"""

from collections.abc import Buffer, Callable, Sequence
from typing import Any

#: The interface the module offers (``dataplane.NATIVE_INTERFACE`` must equal it).
INTERFACE: int
#: The crate's version (native/Cargo.toml).
VERSION: str
#: Bytes of records a scan step reads at most.
RUN_BYTES: int

# Records: encoding a batch (each returns the records' bytes and their results).
def encode_plain(
    bodies: Sequence[bytes],
    topic: Any,
    tail: int,
    now: int,
    turn: int,
    bases: Sequence[int],
    prefix: str,
    topic_name: str,
    status: str,
    result_type: type,
) -> tuple[Any, ...]: ...
def encode_placed(records: Sequence[Any], topic: Any) -> tuple[Any, ...]: ...
def encode_events(
    topic: Any,
    store_ms: int,
    start: int,
    first_number: int,
    appends: Sequence[Any],
    prefix: str,
    topic_name: str,
    status: str,
    result_type: type,
) -> tuple[Any, ...]: ...

# Records: checking and decoding.
def check_at(segment: Buffer, pos: int, commit_offset: int) -> tuple[Any, ...]: ...
def decode_at(
    segment: Buffer,
    pos: int,
    commit_offset: int,
    message_id: str | None,
    expected_length: int,
    message_type: type,
) -> Any: ...
def read_entries(
    segment: Buffer,
    base: int,
    entries: Buffer,
    start: int,
    topic: bytes,
    topic_name: str,
    queue_id: int,
    first_queue_offset: int,
    prefix: str,
    wanted_hash: int,
    wanted_tag: bytes | None,
    max_messages: int,
    message_type: type,
    messages: list[Any],
) -> tuple[int, int]: ...
def read_members(
    segment: Buffer,
    pos: int,
    stop: int,
    base: int,
    topics: Any,
    queues: Any,
    since_ms: int,
    until_ms: int,
    offsets: Any,
    prefix: str,
    max_messages: int,
    message_type: type,
    messages: list[Any],
) -> tuple[Any, ...]: ...
def canonical_offset(message_id: str, prefix: str) -> int | None: ...

# Scanning a segment (recovery, verify): events, with runs of intact records.
def scan_step(
    segment: Buffer,
    base: int,
    start: int,
    sealed: bool,
    durable_end: int,
    run_bytes: int = ...,
) -> tuple[list[tuple[str, int, int, str, Run | None]], int | None]: ...

# The follow's walk over a segment's records (follow.py ``_walk``).
def follow_spans(
    segment: Buffer, base: int, start: int, limit: int
) -> tuple[int, int | None, list[tuple[bytes, int, int, int, int]]]: ...

class Run:
    """Consecutive intact records found by ``scan_step``."""

    @property
    def count(self) -> int: ...
    def headers(self) -> list[tuple[Any, ...]]: ...
    @property
    def group_count(self) -> int: ...
    def queues(self, groups: list[int] | None = None) -> Any: ...
    def events(self, topics: Any) -> Any: ...
    def replay_blocks(
        self,
        topic: bytes,
        queues: int,
        created: int,
        queue_since: list[int],
        pending: list[int],
        index: BlockIndex,
        files: list[tuple[int, int]],
        per_block: int,
        per_file: int,
        block_bytes: int,
    ) -> tuple[list[int], int, int, list[int]]: ...
    def pack(
        self,
        sinces: Any,
        interval: int,
        index_from: int,
        dedup_property: bytes | None,
        dedup_prefix: bytes | None,
        groups: list[int] | None = None,
    ) -> Any: ...

# Consume-queue entries and hashes.
def seal_entries(entries: Buffer) -> Buffer: ...
def entry_checked(entry: bytes) -> bool: ...
def key_hash(topic: bytes, key: bytes) -> int: ...
def tag_hash(tag: bytes) -> int: ...
def stream_hashes(stream_id: bytes, command_id: bytes | None) -> tuple[int, int]: ...

# The record layout the crate writes (tests/engine/test_record_layout.py).
def record_layout() -> dict[str, Any]: ...

# Maps in a mapping's pages (MADV_POPULATE_READ); the errno it met, or 0.
def populate(map: Buffer, start: int, end: int) -> int: ...

class Filter:
    """A compiled filter expression (filters.py); ``ValueError(message, position, line,
    column)`` when it does not compile."""

    def __new__(cls, source: str) -> Filter: ...
    @property
    def source(self) -> str: ...
    def matches(
        self,
        topic: str,
        queue: int,
        offset: int,
        commit_offset: int,
        born_ms: int,
        stored_ms: int,
        tag: str | None,
        keys: Sequence[str],
        properties: dict[str, str],
        body: bytes,
    ) -> bool: ...
    def keep(self, messages: Sequence[Any]) -> tuple[list[Any], int, str | None]: ...

class Pen:
    """The robust, process-shared write mutex in the ``state`` header (writesession.py)."""

    @staticmethod
    def open(state_path: Any, alone: bool) -> Pen | None: ...
    def lock(self) -> bool: ...
    def unlock(self) -> None: ...
    def consistent(self) -> None: ...

class ThreadLock:
    """A lock between the threads of one process (``threading.Lock``, or ``RLock`` when
    ``reentrant``), which the native append takes without a Python call; waiting for it
    releases the GIL."""

    def __new__(cls, reentrant: bool = False) -> ThreadLock: ...
    def acquire(self, blocking: bool = True, timeout: float = -1.0) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def held_here(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc_info: object) -> bool: ...

class StoreCore:
    """An open store's reads in one call each (dataplane.store_core)."""

    def __new__(
        cls,
        store: Any,
        log: Any,
        shared: Buffer,
        prefix: str,
        message_type: type,
        topics: dict[str, Any],
        queue_type: type,
        fileio: Any,
        genuine_pread: Callable[..., Any],
        shared_types: tuple[type, type, type, type],
    ) -> StoreCore: ...
    def get(self, message_id: str) -> Any | None: ...
    def get_or_long_way(self, message_id: str) -> Any: ...
    def get_many(self, message_ids: list[str]) -> tuple[list[Any], list[int]]: ...
    def read_or_long_way(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, tag: str | None = None
    ) -> list[Any]: ...
    def scan_filtered(
        self,
        filter: Filter,
        topic: str,
        queue: int,
        offset: int,
        end: int,
        max_records: int,
        max_matches: int,
        max_seconds: float,
    ) -> tuple[Any, ...]: ...
    def close(self) -> None: ...

class AppendCore:
    """An open store's common ``append`` in one call (nativeappend.append_core)."""

    def __new__(
        cls,
        store: Any,
        pen: Pen,
        dispatchers: list[Any],
        state_map: Buffer,
        prefix: str,
        result_type: type,
        snapshot_type: type,
        queue_type: type,
        genuine: Sequence[tuple[Any, str, Any]],
        max_body: int,
        slotted: tuple[type, type, type, type],
    ) -> AppendCore: ...
    def append(self, topic: str, body: bytes) -> Any | None: ...
    def append_or_long_way(
        self,
        topic: str,
        body: bytes | str,
        key: str | list[str] | None = None,
        tag: str | None = None,
        queue: int | None = None,
        properties: Any = None,
        dedup_id: str | None = None,
    ) -> Any: ...
    def append_batch(self, state: Any, bodies: list[bytes]) -> list[Any] | None: ...
    def append_items(self, state: Any, items: list[tuple]) -> list[Any] | None: ...
    def append_messages(self, state: Any, messages: list) -> list[Any] | None: ...
    @property
    def appended(self) -> int: ...
    @property
    def batched(self) -> int: ...
    @property
    def marked(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    @property
    def followed(self) -> int: ...
    @property
    def caught_up(self) -> int: ...
    @property
    def pen_waits(self) -> tuple[int, int]: ...
    def pretouch(self, map: Buffer, start: int, stop: int) -> None: ...
    def close(self) -> None: ...

class Refusals:
    """Why a store refuses writes, one bit each (``dataplane.REFUSED_*``); 0 while it
    takes them. Moved by the parts that change them, read by the native append."""

    def __new__(cls) -> Refusals: ...
    def set(self, bits: int, on: bool) -> None: ...
    @property
    def value(self) -> int: ...

class Asks:
    """The log ends past which an append asks the flusher (``flushed`` +
    ``flush_every``; never when that is None), the warmer (``asked`` + ``warm_every``
    once engaged) and the waiting pulls (any end while one waits)."""

    def __new__(cls, flush_every: int | None, warm_every: int) -> Asks: ...
    def flushed(self, flushed: int) -> None: ...
    def warm(self, engaged: bool, asked: int) -> None: ...
    def pulls(self, waiting: int) -> None: ...
    @property
    def ends(self) -> tuple[int, int, int, int]: ...

class Word:
    """A number the native calls read and move without a look-up."""

    def __new__(cls, value: int) -> Word: ...
    value: int

class QueueEnd:
    """A ``BlockQueue``'s ``_min_offset``, ``_max_offset``, ``changes`` or ``_loaded``:
    a data descriptor over ``obj._ends`` (its ``BlockIndex``) at ``obj.queue_id``."""

    def __new__(cls, field: str) -> QueueEnd: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any: ...
    def __set__(self, obj: Any, value: Any) -> None: ...
    def __delete__(self, obj: Any) -> None: ...

class BlockIndex:
    """A shared topic's block index: (queue, seq) -> block, and each queue's first and
    last seq (blockqueue.BlockStore.index)."""

    def __new__(cls) -> BlockIndex: ...
    def __len__(self) -> int: ...
    def get(self, queue: int, seq: int) -> int | None: ...
    def remember(self, queue: int, seq: int, block: int) -> None: ...
    def pop(self, queue: int, seq: int) -> int | None: ...
    def seq_range(self, queue: int) -> tuple[int, int] | None: ...
    def set_range(self, queue: int, seqs: tuple[int, int] | None) -> None: ...
    def queues(self) -> list[int]: ...
    def items(self) -> list[tuple[int, int, int]]: ...
    def drop_files(self, firsts: list[int], per_file: int) -> None: ...
    def files_with_last_blocks(self, per_file: int) -> list[int]: ...
    def items_in_files(self, firsts: list[int], per_file: int) -> list[tuple[int, int, int]]: ...
    # Each queue's ends, kept here (blockqueue.BlockQueue reads and sets them).
    def min_of(self, queue: int) -> int: ...
    def max_of(self, queue: int) -> int: ...
    def changes_of(self, queue: int) -> int: ...
    def loaded(self, queue: int) -> bool: ...
    def set_min(self, queue: int, value: int) -> None: ...
    def set_max(self, queue: int, value: int) -> None: ...
    def set_changes(self, queue: int, value: int) -> None: ...
    def set_loaded(self, queue: int, value: bool) -> None: ...
    def set_made(self, queue: int, value: bool) -> None: ...
    def forget_ends(self, queue: int) -> None: ...
    def loaded_queues(self) -> list[int]: ...
    def take_headers(
        self,
        data: bytes,
        block_bytes: int,
        first: int,
        count: int,
        end: int,
        allocated: int,
        limit: int | None,
    ) -> tuple[int, list[int], bool]: ...
    def unsettled_queues(
        self,
        queues: int,
        skip: list[int],
        topic: bytes,
        files: list[tuple[int, int]],
        per_block: int,
        per_file: int,
        block_bytes: int,
        segments: list[tuple[int, int, int]],
        log_min: int,
        tail: int,
        floor: int,
    ) -> tuple[list[int], int]: ...
    def maybe_past_ends(
        self,
        queues: list[int],
        positions: list[int],
        files: list[tuple[int, int]],
        per_block: int,
        per_file: int,
        block_bytes: int,
    ) -> list[int]: ...
    def clear(self) -> None: ...

class LogSyncer:
    """Sync mode's group commit: a flusher thread fdatasyncs the log back to back while
    the native appends wait on it without the GIL (nativeappend.log_syncer)."""

    def __new__(cls, flushed: int, checkpoint: Any | None, timeout_ms: int) -> LogSyncer: ...
    @property
    def flushed(self) -> int: ...
    @property
    def syncs(self) -> int: ...
    @property
    def times(self) -> tuple[float, float]: ...
    @property
    def round_times(self) -> tuple[float, float, float, float, float]: ...
    def advance(self, flushed: int) -> None: ...
    def fail(self, errno: int) -> None: ...
    def fail_syncs(self, errno: int | None) -> None: ...
    def hold_syncs(self, held: bool) -> None: ...
    def close(self) -> None: ...

def prepare_items(
    items: list[Any],
    queue_count: int,
    frozen: Any,
    max_body: int,
    fixed: int,
    capacity: int,
    message_type: type,
) -> list[tuple[Any, ...]] | None: ...
def seam_changed() -> int: ...
def seam_generation() -> int: ...
def drop_block_pages(file: object, part: int = 0) -> bool: ...
def refault_block_pages(file: object) -> int: ...
def unmap_block_file(file: object) -> bool: ...
def set_io(
    hook: Callable[[str, int, int, bytes | int | None, str], object] | None,
    covers: Sequence[tuple[object, str]] = ...,
) -> None: ...
def pin_clock(ms: int | None) -> None: ...

# Blocking calls a native append makes way for (fileio.pwrite_all's writes, fileio.fdatasync):
# as os.pwrite and os.fdatasync; when one ends, an appending thread lets go of the GIL
# until this one has it back (returning.rs).
def pwrite(fd: int, data: Buffer, offset: int) -> int: ...
def fdatasync(fd: int) -> None: ...
def made_way() -> int: ...

# The state ring's notes `after + 1` to `upto`, per queue: ((topic id, queue, highest end), ...)
# in first-noted order and the latest store time (None: no note); None where
# SharedState.notes refuses (notes.rs).
def noted_ends(
    map: Buffer, after: int, upto: int
) -> tuple[list[tuple[int, int, int]], int | None] | None: ...
