"""The ``tidemark`` Python data source: batch reads, streaming reads, and a writer.

Reading (``spark.read.format("tidemark")`` or ``spark.readStream``)
--------------------------------------------------------------------

Options (names as in Spark's Kafka source where the meaning is the same; an option the
format does not know fails the read with the list of the ones it does, ``options.py``):

``path``
    The store directory (or ``.load(path)``). Executors open its segment files
    themselves, read-only: on a cluster it must be the same path on every machine.
``topics``
    Comma-separated topic names. Default: every topic in ``topics.json`` except the
    retry (``%RETRY%…``) and dead-letter (``%DLQ%…``) topics, which are read only when
    named. Records of deleted topics (and of a deleted namesake of a topic created
    again) never appear. A read or stream naming a topic the store does not have fails.
``since``, ``until``
    Store-time window ``since <= store_time < until``: ms since the epoch, or ISO 8601
    (no zone means UTC).
``startingOffsets``, ``endingOffsets`` (``endingOffsets``: batch reads only)
    ``earliest`` (the default start), ``latest`` (the default end; a stream starting
    there reads what is appended after it starts), a commit-log position, or JSON per
    topic and queue as Kafka's (``{"orders": {"0": 23, "1": -2}}``, -2 earliest, -1
    latest; the start is the first offset read, the end the first not read). Batch
    reads bounded this way need no time window to be incremental.
``failOnDataLoss``
    ``true`` (default): a stream whose next record retention deleted fails with a
    sentence saying how many messages are gone, as does a read whose
    ``startingOffsets`` asks for deleted records. ``false``: it goes on from the oldest
    record left and logs how many it skipped.
``maxOffsetsPerTrigger``, ``maxBytesPerTrigger`` (streams)
    At most this many messages (of the stream's topics) or bytes of log per
    micro-batch, the first one included. ``Trigger.AvailableNow`` honours them too.
``upto``
    ``published`` (default: the tail every engine reader sees) or ``flushed`` (only what
    the checkpoint says was fsynced; see ``logview`` for when that matters).
``splitBytes``, ``minPartitions``
    Cut the log into ranges of about ``splitBytes`` (default 64 MiB), or more, smaller
    ones when that gives fewer than ``minPartitions``; each range is one Spark task.

Filters on ``topic`` (``=``, ``IN``), ``queue`` (``=``, ``IN``, ranges), ``queue_offset``,
``commit_offset`` and ``store_time`` (ranges, ``=``) in a batch query are pushed down
(``pushFilters``, listed as ``PushedFilters`` by ``explain("formatted")``): they narrow
the plan and the reader applies them exactly, so Spark does not check them again. A
pushed filter on a column that damage rows leave null (all but ``commit_offset``) drops
those rows, as SQL would; use the options to keep them. Streams take the ``topics``
option (Spark pushes no filters into a stream).

Columns: ``message_id, topic, queue, queue_offset, commit_offset, born_time,
store_time`` (timestamps, ms precision), ``tag, keys`` (array<string>), ``properties``
(map<string,string>), ``body`` (binary) and ``corrupt``.

**Exact or loud.** Each task reads a byte range of one segment that the driver planned
from the store's metadata: the segment file, its size, and how many records of the
read's topics start in the range (from the consume queues). The task fails with a
sentence naming the file and the host when it cannot open the file, sees it shorter,
or reads another number of records (``scanning.py``); it never passes a missing file
off as one retention deleted.

**Corrupt records** are never fatal. Each bad stretch the read meets (a record failing
its frame or CRC check, bytes where no record starts) becomes one row whose ``corrupt``
column is ``{length, reason}`` and whose ``commit_offset`` is where the stretch starts;
every other column of that row is null. Message rows have ``corrupt`` null, so
``df.where("corrupt IS NULL")`` is the messages and ``df.where("corrupt IS NOT NULL")``
the damage report. The read goes on with the next intact record, as the engine's
recovery scan does. ``scanning.counters`` also counts what this process's scans decoded,
skipped and found damaged.

Streaming offsets are commit-log positions: a micro-batch reads the records starting in
``[start, end)``. The offset JSON in the checkpoint is ``{"position": n, "queues":
{topic: {queue: last queue offset covered}}}`` (the per-queue part for streams of at
most 1,024 queues), so an operator can relate it to the offsets the console shows;
``"from"`` keeps JSON ``startingOffsets`` the stream has not reached yet. It supports
``Trigger.AvailableNow`` (it reads up to the tail seen when the query starts) and
ordinary micro-batches, and picks up appends made between triggers.

Writing (``df.write.format("tidemark").mode("append")``)
---------------------------------------------------------

Options: ``path``, ``topic``, ``batchSize``, and the engine's settings (below).
Columns: ``body`` (binary or string, required), ``topic`` (the ``topic`` option, when
given, overrides it for every row, as in Spark's Kafka sink),
``key`` (string or array of strings; ``keys`` is read too, so a read DataFrame can be
written back), ``tag``, ``properties`` (map<string,string>), ``born_time`` (timestamp)
and ``dedup_id``; other columns are ignored. Each Spark task opens the store with
``MessageStore.open`` (several processes may have a store open at once), appends its
rows with ``append_batch`` in batches of ``batchSize`` (default 1000) per topic, and
closes the store, which flushes it. Options named like ``StoreConfig`` fields
(``flush_mode``, ``index_slots``…; ``segment_bytes`` defaults to the store's own) are
passed to the engine. A task Spark retries appends its rows again: give rows a
``dedup_id`` for exactly-once within the store's dedup window.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from storeadapter.engine import Message, MessageStore, StoreConfig, filters
from storeadapter.engine.errors import StoreFormatError
from storeadapter.engine.results import Corruption, StoredMessage

from . import logview
from .errors import DataLossError
from .offsets import (
    MAX_LISTED_QUEUES,
    covered,
    resolve_end,
    resolve_start,
    skipped_by_retention,
)
from .options import (
    BATCH_READ_OPTIONS,
    EARLIEST,
    LATEST,
    STREAM_READ_OPTIONS,
    WRITE_OPTIONS,
    OffsetSpec,
    boolean,
    check_names,
    parse_offsets,
    positive_int,
)
from .planning import (
    DEFAULT_SPLIT_BYTES,
    LogRange,
    RecordFilter,
    Selection,
    parse_time,
    plan_ranges,
    timestamp_bound_us,
)
from .queueindex import QueueIndex
from .scanning import read_range

FORMAT_NAME = "tidemark"
log = logging.getLogger(__name__)

SCHEMA = StructType(
    [
        StructField("message_id", StringType()),
        StructField("topic", StringType()),
        StructField("queue", IntegerType()),
        StructField("queue_offset", LongType()),
        StructField("commit_offset", LongType()),
        StructField("born_time", TimestampType()),
        StructField("store_time", TimestampType()),
        StructField("tag", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("body", BinaryType()),
        StructField(
            "corrupt",
            StructType([StructField("length", LongType()), StructField("reason", StringType())]),
        ),
    ]
)

_BATCH_ROWS = 4096
_BATCH_BYTES = 32 << 20


# ------------------------------------------------------------------------ options


def _store_path(options) -> str:
    path = options.get("path")
    if not path:
        raise ValueError(
            'the tidemark format needs the store directory: .option("path", ...) or .load(path)'
        )
    return str(path)


def _selection(options) -> Selection:
    selection = Selection()
    topics = options.get("topics")
    if topics is not None:
        names = {name.strip() for name in str(topics).split(",") if name.strip()}
        if not names:
            raise ValueError("the topics option names no topic")
        selection.narrow_topics(names)
    if options.get("since") is not None:
        selection.narrow_since(parse_time(options.get("since"), "since"))
    if options.get("until") is not None:
        selection.narrow_until(parse_time(options.get("until"), "until"))
    expression = options.get("filter")
    if expression is not None:
        # Compiled here, on the driver, so a bad one fails the read with its position.
        filters.compile_filter(str(expression))
        selection.expression = str(expression)
    return selection


def _upto(options) -> str:
    upto = str(options.get("upto", logview.UPTO_PUBLISHED)).lower()
    if upto not in logview.UPTO_CHOICES:
        raise ValueError(f"upto must be one of {', '.join(logview.UPTO_CHOICES)}, not {upto!r}")
    return upto


@dataclasses.dataclass
class ReadSettings:
    """A read's options, checked."""

    path: str
    selection: Selection
    upto: str
    split_bytes: int
    min_partitions: int
    starting: OffsetSpec
    fail_on_data_loss: bool
    asked_topics: frozenset[str] = frozenset()  # named by the topics option

    @classmethod
    def from_options(cls, options, known: tuple[str, ...], what: str) -> ReadSettings:
        check_names(options, known, what)
        selection = _selection(options)
        return cls(
            _store_path(options),
            selection,
            _upto(options),
            positive_int(options, "splitBytes", DEFAULT_SPLIT_BYTES) or DEFAULT_SPLIT_BYTES,
            positive_int(options, "minPartitions", 1) or 1,
            parse_offsets(options.get("startingOffsets", EARLIEST), "startingOffsets"),
            boolean(options, "failOnDataLoss", True),
            frozenset(selection.topics or ()),
        )

    def check_topics(self, snap: logview.LogSnapshot) -> None:
        """Every topic the read names exists in the store."""
        unknown = sorted(self.asked_topics - set(snap.topics))
        if unknown:
            known = ", ".join(sorted(snap.topics)) or "none"
            raise ValueError(
                f"the store at {self.path} has no topic {', '.join(map(repr, unknown))} "
                f"(its topics: {known})"
            )


# ---------------------------------------------------------------------- partitions


class TidemarkPartition(InputPartition):
    """One range of one segment, with what to keep from it (picklable)."""

    def __init__(
        self, log_range: LogRange, wanted: RecordFilter, id_prefix: str, skip_lost: bool = False
    ) -> None:
        super().__init__(log_range.first_offset)
        self.log_range = log_range
        self.wanted = wanted
        self.id_prefix = id_prefix
        self.skip_lost = skip_lost


def _read(partition: InputPartition) -> Iterator:
    if not isinstance(partition, TidemarkPartition):
        return iter(())  # Spark's stand-in when a plan has no partitions
    items = read_range(
        partition.log_range, partition.wanted, partition.id_prefix, partition.skip_lost
    )
    return arrow_batches(items)


def arrow_schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


def arrow_batches(
    items: Iterable[StoredMessage | Corruption],
    max_rows: int = _BATCH_ROWS,
    max_bytes: int = _BATCH_BYTES,
) -> Iterator:
    """Messages and corruptions as Arrow record batches of ``SCHEMA``."""
    import pyarrow as pa

    schema = arrow_schema()
    types = [f.type for f in schema]
    columns: list[list] = [[] for _ in types]
    (ids, topics, queues, queue_offsets, commit_offsets, borns, stores, tags, keys, props,
     bodies, corrupts) = columns  # fmt: skip
    rows = 0
    size = 0

    def batch():
        arrays = [pa.array(column, type=kind) for column, kind in zip(columns, types, strict=True)]
        for column in columns:
            column.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    for item in items:
        if isinstance(item, StoredMessage):
            (message_id, topic, queue, queue_offset, commit_offset, born_ms, store_ms, tag,
             key_list, properties, body) = item  # fmt: skip
            ids.append(message_id)
            topics.append(topic)
            queues.append(queue)
            queue_offsets.append(queue_offset)
            commit_offsets.append(commit_offset)
            borns.append(born_ms * 1000)
            stores.append(store_ms * 1000)
            tags.append(tag)
            keys.append(key_list)
            props.append(properties)
            bodies.append(body)
            corrupts.append(None)
            size += len(body)
        else:
            for column in columns:
                column.append(None)
            commit_offsets[-1] = item.commit_offset
            corrupts[-1] = {"length": item.length, "reason": item.reason}
        rows += 1
        if rows >= max_rows or size >= max_bytes:
            yield batch()
            rows = size = 0
    if rows:
        yield batch()


# -------------------------------------------------------------------- batch reads


def _int_value(item) -> int | None:
    value = getattr(item, "value", None)
    return value if type(value) is int else None


class TidemarkReader(DataSourceReader):
    """Batch reads: ranges of the log between the read's offsets (see ``planning``)."""

    def __init__(self, options) -> None:
        self.settings = ReadSettings.from_options(options, BATCH_READ_OPTIONS, "a batch read")
        if self.settings.starting.kind == LATEST:
            raise ValueError(
                'startingOffsets cannot be "latest" for a batch read (it would read nothing); '
                "use a stream for what is appended from now on"
            )
        self.ending = parse_offsets(options.get("endingOffsets", LATEST), "endingOffsets")
        self.selection = self.settings.selection
        self.pushed: list[str] = []

    def pushFilters(self, filters):  # noqa: N802 - the API's name
        """Take the filters on ``topic``, ``queue``, ``queue_offset``, ``commit_offset``
        and ``store_time`` the reader can apply exactly; hand the others back to Spark."""
        for item in filters:
            if self._push(item):
                self.pushed.append(repr(item))
            else:
                yield item

    def _push(self, item) -> bool:
        attribute = getattr(item, "attribute", None)
        if attribute == ("topic",):
            pushed = self._push_topic(item)
        elif attribute == ("store_time",):
            pushed = self._push_store_time(item)
        elif attribute in (("queue",), ("queue_offset",), ("commit_offset",)):
            pushed = self._push_number(attribute[0], item)
        else:
            pushed = False
        if pushed and attribute != ("commit_offset",):
            self.selection.messages_only = True  # damage rows have these columns null
        return pushed

    def _push_topic(self, item) -> bool:
        if isinstance(item, (EqualTo, EqualNullSafe)) and isinstance(item.value, str):
            self.selection.narrow_topics([item.value])
            return True
        if isinstance(item, In) and all(isinstance(v, str) for v in item.value):
            self.selection.narrow_topics(item.value)
            return True
        return False

    def _push_number(self, column: str, item) -> bool:
        if column == "queue" and isinstance(item, In):
            if not all(type(v) is int for v in item.value):
                return False
            self.selection.narrow_queues(item.value)
            return True
        value = _int_value(item)
        if value is None:
            return False
        if isinstance(item, (EqualTo, EqualNullSafe)):
            low, high = value, value + 1
        elif isinstance(item, GreaterThan):
            low, high = value + 1, None
        elif isinstance(item, GreaterThanOrEqual):
            low, high = value, None
        elif isinstance(item, LessThan):
            low, high = None, value
        elif isinstance(item, LessThanOrEqual):
            low, high = None, value + 1
        else:
            return False
        narrow = {
            "queue": self.selection.narrow_queue_ids,
            "queue_offset": self.selection.narrow_queue_offsets,
            "commit_offset": self.selection.narrow_positions,
        }[column]
        narrow(None if low is None else max(low, 0), None if high is None else max(high, 0))
        return True

    def _push_store_time(self, item) -> bool:
        bound = timestamp_bound_us(getattr(item, "value", None))
        if bound is None:
            return False
        floor_ms = bound // 1000  # the last whole ms at or before the bound
        ceil_ms = -((-bound) // 1000)  # the first whole ms at or after it
        if isinstance(item, GreaterThanOrEqual):
            self.selection.narrow_since(ceil_ms)
        elif isinstance(item, GreaterThan):
            self.selection.narrow_since(floor_ms + 1)
        elif isinstance(item, LessThan):
            self.selection.narrow_until(ceil_ms)
        elif isinstance(item, LessThanOrEqual):
            self.selection.narrow_until(floor_ms + 1)
        elif isinstance(item, (EqualTo, EqualNullSafe)):
            self.selection.narrow_since(ceil_ms)
            self.selection.narrow_until(floor_ms + 1)
        else:
            return False
        return True

    def partitions(self) -> list[TidemarkPartition]:
        settings = self.settings
        snap = logview.snapshot(settings.path, settings.upto)
        settings.check_topics(snap)
        selection = dataclasses.replace(self.selection)
        chosen = selection.chosen(snap.topics)
        with QueueIndex(snap) as index:
            start, starts = resolve_start(
                settings.starting, snap, index, chosen, settings.fail_on_data_loss
            )
            end, ends = resolve_end(self.ending, snap, index, chosen)
            selection.narrow_positions(start, end)
            selection.queue_starts, selection.queue_ends = starts, ends
            wanted = selection.resolve(snap.topics)
            low, high = _positions_of_queue_offsets(snap, wanted, index)
            selection.narrow_positions(low, high)
            ranges = plan_ranges(
                snap,
                wanted,
                selection.start,
                selection.end,
                settings.split_bytes,
                settings.min_partitions,
                index,
            )
        return [TidemarkPartition(r, wanted, snap.id_prefix) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition)


def _positions_of_queue_offsets(
    snap: logview.LogSnapshot, wanted: RecordFilter, index: QueueIndex
) -> tuple[int | None, int | None]:
    """Log positions around the records a ``queue_offset`` range keeps (None: no bound),
    looked up in the consume queues when the read's queues allow it."""
    low_offset, high_offset = wanted.min_queue_offset, wanted.max_queue_offset
    if low_offset is None and high_offset is None:
        return None, None
    if wanted.member_count() > MAX_LISTED_QUEUES:
        return None, None
    queues = wanted.member_queues(snap.topics)
    if not all(index.supported(t) for t, _ in queues):
        return None, None
    lows, highs = [], []
    for topic, queue in queues:
        first = index.offset_at(topic, queue, snap.min_offset)
        last = index.range_of(topic, queue)[1]
        if low_offset is not None:
            found = index.position_of(topic, queue, max(low_offset, first))
            lows.append(snap.end if found is None else found)
        if high_offset is not None:
            found = index.position_of(topic, queue, max(high_offset, first))
            highs.append(snap.end if found is None or high_offset >= last else found)
    return (min(lows, default=None), max(highs, default=None))


# ---------------------------------------------------------------- streaming reads


class TidemarkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over commit-log positions (see the module docstring)."""

    def __init__(self, options) -> None:
        self.settings = ReadSettings.from_options(options, STREAM_READ_OPTIONS, "a stream")
        self.max_offsets = positive_int(options, "maxOffsetsPerTrigger", None)
        self.max_bytes = positive_int(options, "maxBytesPerTrigger", None)
        self.settings.check_topics(self._snapshot())
        self._target: int | None = None

    def _snapshot(self) -> logview.LogSnapshot:
        return logview.snapshot(self.settings.path, self.settings.upto)

    def _offset(
        self, snap: logview.LogSnapshot, index: QueueIndex, position: int, pending: dict
    ) -> dict:
        """The offset JSON of ``position``: the per-queue offsets it covers, and the
        JSON ``startingOffsets`` it has not reached yet."""
        wanted = self.settings.selection.resolve(snap.topics)
        offset: dict = {"position": position}
        listed = covered(snap, index, wanted, position)
        if listed is not None:
            offset["queues"] = listed
        ahead = {
            name: {
                str(queue): first
                for queue, first in per_queue.items()
                if name in snap.topics
                and index.offset_at(snap.topics[name], int(queue), position) < first
            }
            for name, per_queue in pending.items()
        }
        ahead = {name: per_queue for name, per_queue in ahead.items() if per_queue}
        if ahead:
            offset["from"] = ahead
        return offset

    def initialOffset(self) -> dict:  # noqa: N802 - the API's name
        settings = self.settings
        snap = self._snapshot()
        with QueueIndex(snap) as index:
            chosen = settings.selection.chosen(snap.topics)
            position, starts = resolve_start(
                settings.starting, snap, index, chosen, settings.fail_on_data_loss
            )
            return self._offset(snap, index, position, starts)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - the API's name
        self._target = self._snapshot().end

    def getDefaultReadLimit(self):  # noqa: N802 - the API's name
        if self.max_offsets is not None:
            return ReadMaxRows(self.max_offsets)
        if self.max_bytes is not None:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:  # noqa: N802
        snap = self._snapshot()
        target = snap.end if self._target is None else min(snap.end, self._target)
        with QueueIndex(snap) as index:
            if start is None:
                return self._offset(snap, index, target, {})
            first = int(start["position"])
            if first < snap.min_offset:
                self._data_loss(snap, index, start)
                first = snap.min_offset
            end = max(first, target)
            if isinstance(limit, ReadMaxRows):
                end = self._after_records(
                    snap, index, first, end, limit.max_rows, start.get("from") or {}
                )
            elif isinstance(limit, ReadMaxBytes):
                end = min(end, first + limit.max_bytes)
            end = max(end, int(start["position"]))  # a stream's position never goes back
            return self._offset(snap, index, end, start.get("from") or {})

    def _after_records(
        self,
        snap: logview.LogSnapshot,
        index: QueueIndex,
        first: int,
        end: int,
        count: int,
        pending: dict,
    ) -> int:
        """The furthest position up to ``end`` with at most ``count`` records the stream
        keeps (of its queues, at or past their ``pending`` starting offsets) starting in
        ``[first, position)``."""
        queues = self.settings.selection.resolve(snap.topics).member_queues(snap.topics)
        if not all(index.supported(t) for t, _ in queues):
            raise ValueError(
                "maxOffsetsPerTrigger cannot count the records of topics whose queues share "
                "block files; use maxBytesPerTrigger"
            )
        floors = {
            (t.name, q): max(
                index.offset_at(t, q, first), int((pending.get(t.name) or {}).get(str(q), 0))
            )
            for t, q in queues
        }

        def records_before(position: int) -> int:
            return sum(
                max(0, index.offset_at(t, q, position) - floors[t.name, q]) for t, q in queues
            )

        if records_before(end) <= count:
            return end
        low, high = first, end  # records_before(low) <= count < records_before(high)
        while high - low > 1:
            middle = (low + high) // 2
            if records_before(middle) <= count:
                low = middle
            else:
                high = middle
        return low

    def _data_loss(self, snap: logview.LogSnapshot, index: QueueIndex, start: dict) -> None:
        skipped = skipped_by_retention(snap, index, start.get("queues"))
        how_many = "an unknown number of" if skipped is None else str(skipped)
        sentence = (
            f"retention deleted the log of {self.settings.path} below {snap.min_offset} "
            f"before the stream read it: its position {start['position']} is behind the "
            f"log's first offset, so {how_many} messages of its topics are gone"
        )
        if self.settings.fail_on_data_loss:
            raise DataLossError(
                f'{sentence}; set .option("failOnDataLoss", "false") to go on from there'
            )
        log.warning("failOnDataLoss is false: %s; skipped them", sentence)

    def reportLatestOffset(self) -> dict:  # noqa: N802 - the API's name
        return {"position": self._snapshot().end}

    def partitions(self, start: dict, end: dict) -> list[TidemarkPartition]:
        first, last = int(start["position"]), int(end["position"])
        snap = self._snapshot()
        selection = dataclasses.replace(self.settings.selection)
        selection.queue_starts = {
            name: {int(q): int(o) for q, o in per_queue.items()}
            for name, per_queue in (start.get("from") or {}).items()
        }
        with QueueIndex(snap) as index:
            if first < snap.min_offset:
                self._data_loss(snap, index, start)
                first = snap.min_offset
            if first >= last:
                return []
            wanted = selection.resolve(snap.topics)
            ranges = plan_ranges(
                snap,
                wanted,
                first,
                last,
                self.settings.split_bytes,
                self.settings.min_partitions,
                index,
            )
        skip_lost = not self.settings.fail_on_data_loss
        return [TidemarkPartition(r, wanted, snap.id_prefix, skip_lost) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the store keeps every record until retention."""


# ------------------------------------------------------------------------- writes


@dataclasses.dataclass
class TidemarkCommitMessage(WriterCommitMessage):
    """What one task appended: messages per topic, and duplicates the store dropped."""

    appended: dict[str, int]
    duplicates: int = 0


_CONFIG_FIELDS = {f.name.replace("_", "").lower(): f for f in dataclasses.fields(StoreConfig)}
_USED_COLUMNS = ("topic", "key", "keys", "tag", "properties", "body", "born_time", "dedup_id")


class TidemarkWriter(DataSourceArrowWriter):
    def __init__(self, options, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError(
                "the tidemark format only appends (a commit log cannot be overwritten): "
                'use .mode("append")'
            )
        check_names(options, WRITE_OPTIONS, "writing")
        self.path = _store_path(options)
        root = Path(self.path)
        if not (root / "store.json").exists():
            raise StoreFormatError(
                f"there is no Tidemark store at {self.path}: the writer appends to an "
                "existing store (open it with MessageStore.open to create one)"
            )
        self.topic = options.get("topic")
        names = set(schema.fieldNames())
        if "body" not in names:
            raise ValueError("a DataFrame written to tidemark needs a body column")
        if "topic" not in names and not self.topic:
            raise ValueError('give the topic: a topic column or .option("topic", ...)')
        self.columns = [name for name in _USED_COLUMNS if name in names]
        self.batch_size = positive_int(options, "batchSize", 1000) or 1000
        self.config = _store_config(root, options)

    def write(self, iterator) -> TidemarkCommitMessage:
        """Append the task's rows (Arrow record batches) and close the store."""
        appended: dict[str, int] = {}
        duplicates = 0
        pending: dict[str, list[Message]] = {}
        store = MessageStore.open(self.path, self.config)
        try:
            for record_batch in iterator:
                for topic, message in self._messages(record_batch):
                    batch = pending.setdefault(topic, [])
                    batch.append(message)
                    if len(batch) >= self.batch_size:
                        duplicates += _append(store, topic, batch, appended)
                        batch.clear()
            for topic, batch in pending.items():
                if batch:
                    duplicates += _append(store, topic, batch, appended)
        finally:
            store.close()
        return TidemarkCommitMessage(appended, duplicates)

    def _messages(self, record_batch) -> Iterator[tuple[str, Message]]:
        import pyarrow as pa

        names = record_batch.schema.names
        columns = {}
        for name in self.columns:
            column = record_batch.column(names.index(name))
            if pa.types.is_timestamp(column.type):  # to ms since the epoch, whatever the zone
                column = column.cast(pa.timestamp("ms", column.type.tz), safe=False)
                column = column.cast(pa.int64())
            columns[name] = column.to_pylist()
        for i in range(record_batch.num_rows):
            yield self._message({name: values[i] for name, values in columns.items()})

    def _message(self, values: dict) -> tuple[str, Message]:
        topic = self.topic or values.get("topic")
        if not topic:
            raise ValueError("a row has a null topic (and no topic option was given)")
        key = values.get("key")
        if key is None:
            key = values.get("keys") or None
        if key is not None and not isinstance(key, str):
            key = list(key)
        body = values["body"]
        if body is None:
            raise ValueError(f"a row for topic {topic!r} has a null body")
        properties = values.get("properties")
        if properties is not None and not isinstance(properties, dict):
            properties = dict(properties)  # Arrow hands a map over as (key, value) pairs
        return topic, Message(
            body=body,
            key=key,
            tag=values.get("tag"),
            properties=properties or None,
            born_time_ms=values.get("born_time"),
            dedup_id=values.get("dedup_id"),
        )

    def commit(self, messages) -> None:
        """The appends are in the store already: nothing to do."""

    def abort(self, messages) -> None:
        """Appended messages stay (a log is not rolled back); see the module docstring."""


def _append(store: MessageStore, topic: str, batch: list[Message], appended: dict) -> int:
    results = store.append_batch(topic, batch)
    duplicates = sum(1 for r in results if r.status == "DUPLICATE")
    appended[topic] = appended.get(topic, 0) + len(results) - duplicates
    return duplicates


def _store_config(root: Path, options) -> StoreConfig:
    """The engine settings for a writer: the store's own segment size, and any option
    named like a StoreConfig field (``flush_mode``, ``flushMode``…)."""
    settings: dict = {}
    segment_bytes = _existing_segment_bytes(root)
    if segment_bytes:
        settings["segment_bytes"] = segment_bytes
    for name, value in options.items():
        found = _CONFIG_FIELDS.get(name.replace("_", "").lower())
        if found is None:
            continue
        kind = type(found.default)  # str, int or float
        settings[found.name] = kind(value)
    return StoreConfig(**settings)


def _existing_segment_bytes(root: Path) -> int | None:
    import json

    try:
        return int(json.loads((root / "store.json").read_bytes()).get("segment_bytes") or 0)
    except (OSError, ValueError, TypeError):
        return None


# ---------------------------------------------------------------------- the source


class TidemarkDataSource(DataSource):
    """``spark.read.format("tidemark")``; register it with ``storeadapter.spark.register``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> TidemarkReader:
        _check_schema(schema)
        return TidemarkReader(self.options)

    def streamReader(self, schema: StructType) -> TidemarkStreamReader:  # noqa: N802
        _check_schema(schema)
        return TidemarkStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> TidemarkWriter:
        return TidemarkWriter(self.options, schema, overwrite)


def _check_schema(schema: StructType) -> None:
    if schema.fieldNames() != SCHEMA.fieldNames():
        raise ValueError(
            "the tidemark format has a fixed schema; do not pass one with .schema(...) "
            f"(its columns: {', '.join(SCHEMA.fieldNames())})"
        )


__all__ = ["FORMAT_NAME", "SCHEMA", "TidemarkDataSource", "arrow_batches"]
