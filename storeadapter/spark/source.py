"""The ``tidemark`` Python data source: batch reads, streaming reads, and a writer.

Reading (``spark.read.format("tidemark")`` or ``spark.readStream``)
--------------------------------------------------------------------

Options:

``path``
    The store directory (or ``.load(path)``). Executors open its segment files
    themselves, read-only: on a cluster it must be the same path on every machine.
``topics``
    Comma-separated topic names. Default: every topic in ``topics.json`` except the
    retry (``%RETRY%…``) and dead-letter (``%DLQ%…``) topics, which are read only when
    named. Records of deleted topics (and of a deleted namesake of a topic created
    again) never appear. A batch read naming a topic the store does not have fails.
``since``, ``until``
    Store-time window ``since <= store_time < until``: ms since the epoch, or ISO 8601
    (no zone means UTC).
``upto``
    ``published`` (default: the tail every engine reader sees) or ``flushed`` (only what
    the checkpoint says was fsynced; see ``logview`` for when that matters).
``splitBytes``
    Cut a segment into record-aligned ranges of about this many bytes (default 64 MiB);
    each range is one Spark task.
``startingPosition`` (streams)
    ``earliest`` (default: the log's first offset), ``latest`` (the tail when the query
    starts) or a commit-log offset where a record starts.

Filters on ``topic`` (``=``, ``IN``) and ``store_time`` (``<``, ``<=``, ``>``, ``>=``,
``=``) in a batch query are pushed down too (``pushFilters``): they narrow the plan
exactly as the options do, and are also handed back to Spark, which checks them again on
the rows that come out (so a pushed ``topic = …`` drops the corruption rows, whose topic
is null; use the ``topics`` option to keep them).

Columns: ``message_id, topic, queue, queue_offset, commit_offset, born_time,
store_time`` (timestamps, ms precision), ``tag, keys`` (array<string>), ``properties``
(map<string,string>), ``body`` (binary) and ``corrupt``.

**Corrupt records** are never fatal. Each bad stretch the read meets (a record failing
its frame or CRC check, bytes where no record starts) becomes one row whose ``corrupt``
column is ``{length, reason}`` and whose ``commit_offset`` is where the stretch starts;
every other column of that row is null. Message rows have ``corrupt`` null, so
``df.where("corrupt IS NULL")`` is the messages and ``df.where("corrupt IS NOT NULL")``
the damage report. The read goes on with the next intact record, as the engine's
recovery scan does. ``scanning.counters`` also counts what this process's scans decoded,
skipped and found damaged.

Streaming offsets are commit-log positions, ``{"position": n}``: a micro-batch reads the
records starting in ``[start, end)``, where ``end`` is the tail when it was planned. It
supports ``Trigger.AvailableNow`` (it reads up to the tail seen when the query starts)
and ordinary micro-batches, and picks up appends made between triggers.

Writing (``df.write.format("tidemark").mode("append")``)
---------------------------------------------------------

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
from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow
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

from storeadapter.engine import Message, MessageStore, StoreConfig
from storeadapter.engine.errors import CorruptRecordError, StoreFormatError
from storeadapter.engine.record import MARKER, RECORD_MAGIC, check_record
from storeadapter.engine.results import Corruption, StoredMessage

from . import logview
from .planning import (
    DEFAULT_SPLIT_BYTES,
    LogRange,
    RecordFilter,
    Selection,
    parse_time,
    plan_ranges,
    timestamp_bound_us,
)
from .scanning import read_range

FORMAT_NAME = "tidemark"

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
    return selection


def _positive_int(options, name: str, default: int) -> int:
    value = options.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be positive, not {number}")
    return number


def _upto(options) -> str:
    upto = str(options.get("upto", logview.UPTO_PUBLISHED)).lower()
    if upto not in logview.UPTO_CHOICES:
        raise ValueError(f"upto must be one of {', '.join(logview.UPTO_CHOICES)}, not {upto!r}")
    return upto


# ---------------------------------------------------------------------- partitions


class TidemarkPartition(InputPartition):
    """One range of one segment, with what to keep from it (picklable)."""

    def __init__(self, log_range: LogRange, wanted: RecordFilter, id_prefix: str) -> None:
        super().__init__(log_range.first_offset)
        self.log_range = log_range
        self.wanted = wanted
        self.id_prefix = id_prefix


def _partitions(
    snap: logview.LogSnapshot,
    wanted: RecordFilter,
    split_bytes: int,
    start: int | None = None,
    end: int | None = None,
) -> list[TidemarkPartition]:
    ranges = plan_ranges(snap, wanted, start, end, split_bytes)
    return [TidemarkPartition(r, wanted, snap.id_prefix) for r in ranges]


def _read(partition: InputPartition) -> Iterator:
    if not isinstance(partition, TidemarkPartition):
        return iter(())  # Spark's stand-in when a plan has no partitions
    items = read_range(partition.log_range, partition.wanted, partition.id_prefix)
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


class TidemarkReader(DataSourceReader):
    """Batch reads: one partition per segment range (see ``planning``)."""

    def __init__(self, options) -> None:
        self.path = _store_path(options)
        self.selection = _selection(options)
        self.asked_topics = None if self.selection.topics is None else set(self.selection.topics)
        self.upto = _upto(options)
        self.split_bytes = _positive_int(options, "splitBytes", DEFAULT_SPLIT_BYTES)
        self.pushed: list[str] = []

    def pushFilters(self, filters):  # noqa: N802 - the API's name
        """Narrow the plan by the ``topic`` and ``store_time`` predicates it understands.

        Every filter is handed back: Spark checks it again on the rows that come out,
        which keeps SQL's exact semantics (null topics of corruption rows, microseconds
        of timestamp literals) while the store skips what cannot match.
        """
        for item in filters:
            if self._narrow(item):
                self.pushed.append(repr(item))
            yield item

    def _narrow(self, item) -> bool:
        attribute = getattr(item, "attribute", None)
        if attribute == ("topic",):
            if isinstance(item, (EqualTo, EqualNullSafe)) and isinstance(item.value, str):
                self.selection.narrow_topics([item.value])
                return True
            if isinstance(item, In) and all(isinstance(v, str) for v in item.value):
                self.selection.narrow_topics(item.value)
                return True
            return False
        if attribute != ("store_time",):
            return False
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
        snap = logview.snapshot(self.path, self.upto)
        if self.asked_topics:
            unknown = sorted(self.asked_topics - set(snap.topics))
            if unknown:
                known = ", ".join(sorted(snap.topics)) or "none"
                raise ValueError(
                    f"the store at {self.path} has no topic {', '.join(map(repr, unknown))} "
                    f"(its topics: {known})"
                )
        return _partitions(snap, self.selection.resolve(snap.topics), self.split_bytes)

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition)


# ---------------------------------------------------------------- streaming reads


class TidemarkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over commit-log positions: ``{"position": n}``."""

    def __init__(self, options) -> None:
        self.path = _store_path(options)
        self.selection = _selection(options)
        self.upto = _upto(options)
        self.split_bytes = _positive_int(options, "splitBytes", DEFAULT_SPLIT_BYTES)
        self.starting = str(options.get("startingPosition", "earliest")).strip().lower()
        self._target: int | None = None

    def _end(self) -> int:
        return logview.snapshot(self.path, self.upto).end

    def initialOffset(self) -> dict:  # noqa: N802 - the API's name
        snap = logview.snapshot(self.path, self.upto)
        if self.starting == "earliest":
            return {"position": snap.min_offset}
        if self.starting == "latest":
            return {"position": snap.end}
        try:
            position = int(self.starting)
        except ValueError:
            raise ValueError(
                "startingPosition is earliest, latest or a commit-log offset, "
                f"not {self.starting!r}"
            ) from None
        _check_record_boundary(snap, position)
        return {"position": position}

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - the API's name
        self._target = self._end()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:  # noqa: N802
        end = self._end()
        if self._target is not None:
            end = min(end, self._target)
        if start is not None:
            end = max(end, int(start["position"]))  # a tail never goes back for a stream
        return {"position": end}

    def getDefaultReadLimit(self):  # noqa: N802 - the API's name
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict:  # noqa: N802 - the API's name
        return {"position": self._end()}

    def partitions(self, start: dict, end: dict) -> list[TidemarkPartition]:
        first, last = int(start["position"]), int(end["position"])
        if first >= last:
            return []
        snap = logview.snapshot(self.path, self.upto)
        wanted = self.selection.resolve(snap.topics)
        return _partitions(snap, wanted, self.split_bytes, first, last)

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the store keeps every record until retention."""


def _check_record_boundary(snap: logview.LogSnapshot, position: int) -> None:
    if position == snap.end or any(position == s.base for s in snap.segments):
        return
    for listed in snap.segments:
        if listed.base <= position < listed.end:
            with logview.ReadOnlySegment(snap.segment_path(listed), listed.size) as segment:
                pos = position - listed.base
                if pos + 8 <= segment.size and MARKER.unpack_from(segment.view, pos)[1] == (
                    RECORD_MAGIC
                ):
                    try:
                        check_record(segment.view, pos, segment.size, position)
                    except CorruptRecordError:
                        break
                    return
    raise ValueError(
        f"startingPosition {position} is not where a record of the store at {snap.path} "
        f"starts (its log runs from {snap.min_offset} to {snap.end})"
    )


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
        self.batch_size = _positive_int(options, "batchSize", 1000)
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
