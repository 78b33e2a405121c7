"""``store.json`` and ``topics.json``: each parses and passes its CRC32C, and the topics
agree with what is on disk (queue directories, records in the log)."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidNameError, StoreFormatError
from ..metadata import (
    CHECKSUM_FIELD,
    IDENTITY_FIELDS,
    LAYOUT_SHARED,
    MAX_QUEUES_IN_TABLE,
    READABLE_VERSIONS,
    TABLE_FIELDS,
    TopicInfo,
    content_checksum,
    topic_from_json,
)
from .commit_log import LogFacts, QueueRecords
from .problems import Findings

KIND = "metadata"
STORE_JSON = "store.json"
TOPICS_JSON = "topics.json"
_MAX_U32 = (1 << 32) - 1


@dataclass
class Metadata:
    """What the checks of the other files need from the metadata files."""

    queue_file_entries: int | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topics_readable: bool = False


def check_metadata(store: Path) -> tuple[Metadata, Findings]:
    """Parse and check ``store.json`` and ``topics.json`` as the engine reads them."""
    findings = Findings(KIND)
    metadata = Metadata()
    identity = _load(store / STORE_JSON, IDENTITY_FIELDS, findings)
    if identity is None and not (store / STORE_JSON).exists():
        findings.damage(
            STORE_JSON,
            "missing: the store's id is gone, so message ids handed out no longer resolve "
            "(restore it from a backup)",
        )
    elif identity is not None:
        metadata.queue_file_entries = _check_identity(identity, findings)
    table = _load(store / TOPICS_JSON, TABLE_FIELDS, findings)
    if table is not None:
        metadata.topics = _parse_topics(table, findings)
        metadata.topics_readable = True
        findings.counts["topics"] = len(metadata.topics)
    elif not (store / TOPICS_JSON).exists():
        metadata.topics_readable = True  # no file: no topics
    return metadata, findings


def _load(path: Path, fields: set[str], findings: Findings) -> dict | None:
    """The file's JSON object, or None (missing, or damage reported)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        findings.damage(path.name, f"cannot be read as JSON ({error})")
        return None
    findings.count("files")
    if not isinstance(data, dict):
        findings.damage(path.name, "does not hold a JSON object")
        return None
    unknown = sorted(set(data) - fields - {CHECKSUM_FIELD})
    if unknown:
        findings.damage(path.name, f"has fields this engine does not know: {unknown}")
    if CHECKSUM_FIELD in data and data[CHECKSUM_FIELD] != content_checksum(data):
        findings.damage(
            path.name,
            f"fails its CRC32C check: it was damaged, or edited by hand (remove its "
            f"{CHECKSUM_FIELD!r} field to take it as it is)",
        )
    return data


def _check_identity(data: dict, findings: Findings) -> int | None:
    try:
        store_id = int(data["store_id"])
        version = int(data["format_version"])
        int(data["created_ms"])
        entries = int(data["queue_file_entries"])
        int(data.get("segment_bytes", 0))
    except (KeyError, TypeError, ValueError):
        findings.damage(STORE_JSON, "is missing fields or has bad values")
        return None
    if not 0 <= store_id <= _MAX_U32 or not 1 <= entries <= _MAX_U32:
        findings.damage(
            STORE_JSON,
            f"has a store_id or queue_file_entries out of range ({store_id}, {entries})",
        )
        return None
    if version not in READABLE_VERSIONS:
        findings.damage(
            STORE_JSON,
            f"format version {version} is not supported (this engine reads "
            f"{', '.join(map(str, READABLE_VERSIONS))})",
        )
    return entries


def _parse_topics(data: dict, findings: Findings) -> dict[str, TopicInfo]:
    topics: dict[str, TopicInfo] = {}
    items = data.get("topics", [])
    if not isinstance(items, list):
        findings.damage(TOPICS_JSON, "its 'topics' field is not a list")
        return topics
    for position, item in enumerate(items):
        try:
            info = topic_from_json(item)
        except InvalidNameError as error:
            findings.damage(TOPICS_JSON, f"topic {position} has a name that is not valid: {error}")
            continue
        except StoreFormatError as error:  # its settings (topicsettings.py)
            findings.damage(TOPICS_JSON, f"topic {position}: {error}")
            continue
        except (KeyError, TypeError, ValueError, AttributeError):
            findings.damage(TOPICS_JSON, f"topic {position} has missing fields or bad values")
            continue
        if not 1 <= info.queues <= MAX_QUEUES_IN_TABLE:
            findings.damage(
                TOPICS_JSON,
                f"gives topic {info.name!r} {info.queues} queues, outside 1 to "
                f"{MAX_QUEUES_IN_TABLE}",
            )
            continue
        if info.name in topics:
            findings.damage(TOPICS_JSON, f"lists topic {info.name!r} twice")
        topics[info.name] = info
    return topics


def check_topics_against_store(
    store: Path,
    topics: dict[str, TopicInfo],
    log: LogFacts,
    removed_queues: Collection[tuple[str, int]] = (),
) -> Findings:
    """What ``topics.json`` says against what is on disk: each topic's queue directories,
    the queues its records in the log name, and where it began.

    ``removed_queues`` are (topic, queue) pairs the offsets journal records as removed:
    their records stay in the log after the topic's queue count went down.
    """
    findings = Findings(KIND)
    by_topic: dict[str, list[tuple[int, QueueRecords]]] = {}
    for (topic, queue), records in log.queues.items():
        if topic in topics and queue >= topics[topic].queues:
            by_topic.setdefault(topic, []).append((queue, records))
    removed = set(removed_queues)
    for info in topics.values():
        _check_directories(store, info, findings)
        for queue, records in sorted(by_topic.get(info.name, []), key=lambda item: item[0]):
            if (info.name, queue) not in removed:
                _check_queue_past_count(info, queue, records, findings)
        since = [("created_offset", info.created_offset)] + [
            (f"queue_since[{q}]", offset) for q, offset in enumerate(info.queue_since)
        ]
        for name, offset in since:
            if offset > log.end:
                findings.damage(
                    TOPICS_JSON,
                    f"gives {info.name} {name} {offset}, past the log's end ({log.end}): its "
                    "records appended since would be taken for a deleted namesake's",
                )
    for leftover in sorted(_listdir(store / "consumequeue")):
        if leftover not in topics and (store / "consumequeue" / leftover).is_dir():
            findings.note(
                f"consumequeue/{leftover}",
                f"topics.json has no topic {leftover!r} (a deleted topic's leftover: the next "
                "open deletes it)",
            )
    return findings


def _check_directories(store: Path, info: TopicInfo, findings: Findings) -> None:
    directory = store / "consumequeue" / info.name
    where = f"consumequeue/{info.name}"
    names = set(_listdir(directory))
    if info.layout == LAYOUT_SHARED:
        if "blocks" not in names:
            findings.damage(where, "a shared topic without its blocks/ directory")
        return
    present = {int(name) for name in names if name.isdigit() and str(int(name)) == name}
    extra = sorted(q for q in present if q >= info.queues)
    missing = [q for q in range(info.queues) if q not in present]
    if extra:
        findings.damage(
            where,
            f"topics.json gives {info.name} {info.queues} queues, but {where} holds queue "
            f"directories {', '.join(map(str, extra))}",
        )
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
        findings.damage(
            where,
            f"topics.json gives {info.name} {info.queues} queues, but the directories of "
            f"queues {shown} are missing (the next open rebuilds them from the log)",
        )


def _check_queue_past_count(
    info: TopicInfo, queue: int, records: QueueRecords, findings: Findings
) -> None:
    start = records.start_at(info.created_offset)
    count = len(records.offsets) - start
    if count > 0:
        findings.damage(
            TOPICS_JSON,
            f"gives {info.name} {info.queues} queues, but the log holds records of queue "
            f"{queue} written after the topic was created ({count:,} from offset "
            f"{records.offsets[start]})",
        )


def _listdir(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
