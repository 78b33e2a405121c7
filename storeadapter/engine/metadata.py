"""Small metadata files, each replaced atomically: the store's identity and its topics."""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from crc32c import crc32c

from . import clock, fileio
from .errors import InvalidNameError, StoreFormatError
from .names import check_name
from .topicsettings import settings_from_json

#: The format this engine writes. Version 2 gave consume-queue entries a check
#: (docs/FORMAT.md, "Consume queues"); a version 1 store is read too, and its entries are
#: given their checks by the first process that opens it alone (``upgrade_format``).
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: The first version whose every consume-queue entry was written with its check.
ENTRY_CHECKS_VERSION = 2
_MAX_U32 = (1 << 32) - 1
#: No topic has more queues than this (a sanity bound on a damaged topics.json).
MAX_QUEUES_IN_TABLE = 1 << 21


#: The field holding the CRC32C of the rest of a metadata file (canonical JSON), so that
#: damage that leaves valid JSON (a flipped bit in a name or a number) is caught. Files
#: written before it existed have none and are taken as they are.
CHECKSUM_FIELD = "crc32c"


def _load_json(path: Path, fields: set[str]) -> dict:
    """The file's JSON object, refused if it is not one, has a field not in ``fields``
    (a damaged name) or fails its checksum."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as error:
        raise StoreFormatError(f"{path.name} cannot be read as JSON ({error})") from None
    if not isinstance(data, dict):
        raise StoreFormatError(f"{path.name} does not hold a JSON object")
    unknown = sorted(set(data) - fields - {CHECKSUM_FIELD})
    if unknown:
        raise StoreFormatError(f"{path} has fields this engine does not know: {unknown}")
    return data


def _verify_checksum(path: Path, data: dict) -> None:
    if CHECKSUM_FIELD in data and data[CHECKSUM_FIELD] != content_checksum(data):
        raise StoreFormatError(
            f"{path} fails its CRC32C check: it was damaged (or edited by hand; remove "
            f"its {CHECKSUM_FIELD!r} field to take it as it is)"
        )


def content_checksum(data: dict) -> int:
    rest = {key: value for key, value in data.items() if key != CHECKSUM_FIELD}
    return crc32c(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())


def _dump_checked(data: dict) -> bytes:
    return json.dumps({**data, CHECKSUM_FIELD: content_checksum(data)}, indent=2).encode()


@dataclass(frozen=True)
class StoreIdentity:
    """``store.json``: who this store is (its id goes into every message id).

    ``segment_bytes`` is the segment size the store was created with: what tools
    that open an existing store use unless told otherwise.
    """

    store_id: int
    format_version: int
    created_ms: int
    queue_file_entries: int
    segment_bytes: int

    @classmethod
    def load_or_create(
        cls, path: Path, queue_file_entries: int, segment_bytes: int
    ) -> StoreIdentity:
        if path.exists():
            data = _load_json(path, IDENTITY_FIELDS)
            try:
                identity = cls(
                    int(data["store_id"]),
                    int(data["format_version"]),
                    int(data["created_ms"]),
                    int(data["queue_file_entries"]),
                    int(data.get("segment_bytes", segment_bytes)),
                )
            except (KeyError, TypeError, ValueError):
                raise StoreFormatError(f"{path} is missing fields or has bad values") from None
            if not 0 <= identity.store_id <= _MAX_U32 or not (
                1 <= identity.queue_file_entries <= _MAX_U32
            ):
                raise StoreFormatError(
                    f"{path} has a store_id or queue_file_entries out of range "
                    f"({identity.store_id}, {identity.queue_file_entries})"
                )
            if identity.format_version not in READABLE_VERSIONS:
                raise StoreFormatError(
                    f"store format version {identity.format_version} is not supported "
                    f"(this engine reads versions {', '.join(map(str, READABLE_VERSIONS))})"
                )
            _verify_checksum(path, data)
            return identity
        found = [name for name in _STORE_FILES if (path.parent / name).exists()]
        if found:
            raise StoreFormatError(
                f"{path} is missing, but {path.parent} holds a store's files ({', '.join(found)}): "
                "a new identity would make every message id of this store stop resolving. "
                "Restore store.json from a backup (or, to give the store a new identity on "
                "purpose, write one with a new store_id)"
            )
        identity = cls(
            secrets.randbits(32), FORMAT_VERSION, clock.now_ms(), queue_file_entries, segment_bytes
        )
        fileio.write_atomic(path, _dump_checked(asdict(identity)))
        return identity

    def upgrade_format(self, path: Path) -> StoreIdentity:
        """Say in ``store.json`` (at ``path``) that the store is of this engine's format
        (once what the older format lacked was written); return the new identity."""
        upgraded = replace(self, format_version=FORMAT_VERSION)
        fileio.write_atomic(path, _dump_checked(asdict(upgraded)))
        return upgraded

    @property
    def id_prefix(self) -> str:
        return f"{self.store_id:08X}"


#: Files only a store that has a store.json writes: any of them without it means
#: store.json was lost, not that the directory is new.
_STORE_FILES = ("topics.json", "checkpoint", "commitlog", "offsets")
IDENTITY_FIELDS = {
    "store_id",
    "format_version",
    "created_ms",
    "queue_file_entries",
    "segment_bytes",
}
TABLE_FIELDS = {"version", "last_id", "topics"}

LAYOUT_FILES = "files"
LAYOUT_SHARED = "shared"
LAYOUTS = (LAYOUT_FILES, LAYOUT_SHARED)


@dataclass
class TopicInfo:
    name: str
    queues: int
    created_ms: int
    created_offset: int
    frozen: list[int] = field(default_factory=list)
    # Per queue, the commit-log offset from which records belong to it: a queue removed
    # and added again must not pick up its predecessor's records in a rebuild.
    queue_since: list[int] = field(default_factory=list)
    # A small number naming the topic in the shared state's notes (see sharedstate.py).
    id: int = 0
    # "files": every queue has files of its own; "shared": all queues' entries in blocks
    # of a few shared files (blockqueue.py), for topics with very many queues.
    layout: str = "files"
    # A shared topic's entries per block and blocks per file (fixed at creation).
    block_entries: int = 0
    blocks_per_file: int = 0
    # A stream topic: its messages are the events of streams (streams.py), indexed in
    # its event index.
    streams: bool = False
    # Per queue id, how many times a queue of that id was removed (kept past ``queues``):
    # a queue added back under a removed one's id is a new incarnation even when no
    # record was appended in between (its ``since`` is then the same).
    queue_generation: list[int] = field(default_factory=list)
    # The topic's own settings (topicsettings.py), only those set: the others are the
    # store's. Not written when empty, so a store without any is as it was.
    settings: dict[str, int] = field(default_factory=dict)
    # The commit-log offset below which the topic's records are past its own (shorter)
    # retention: its queues start at their first entry at or past it. Never goes back.
    retained_from: int = 0

    def generation(self, queue: int) -> int:
        """How many queues of id ``queue`` were removed before this one."""
        return self.queue_generation[queue] if queue < len(self.queue_generation) else 0

    def incarnation(self, queue: int) -> tuple[int, int, int]:
        """What tells this topic's ``queue`` apart from every earlier queue of that name
        and id (a deleted topic's, a removed queue's): anything a process caches for the
        queue is valid only while this is the same."""
        return self.created_offset, self.since(queue), self.generation(queue)

    def since(self, queue: int) -> int:
        """The commit-log offset from which records of ``queue`` belong to it."""
        if queue < len(self.queue_since):
            return max(self.created_offset, self.queue_since[queue])
        return self.created_offset


_TOPIC_FIELDS = tuple(f.name for f in fields(TopicInfo))
#: Fields written only when they differ from their default (added after version 2: an
#: entry without them is what an engine before them wrote).
_OPTIONAL_FIELDS = {"settings": {}, "retained_from": 0}


def _topic_json(info: TopicInfo) -> dict:
    """A ``topics.json`` entry: ``asdict(info)`` without copying its lists."""
    entry = {name: getattr(info, name) for name in _TOPIC_FIELDS}
    for name, default in _OPTIONAL_FIELDS.items():
        if entry[name] == default:
            del entry[name]
    return entry


def topic_from_json(item: dict) -> TopicInfo:
    """A topic entry of ``topics.json``; KeyError, TypeError, ValueError or
    InvalidNameError when it lacks a field, has a bad value or names no valid topic."""
    info = TopicInfo(
        str(item["name"]),
        int(item["queues"]),
        int(item["created_ms"]),
        int(item["created_offset"]),
        [int(q) for q in item.get("frozen", [])],
        [int(o) for o in item.get("queue_since", [])],
        int(item.get("id", 0)),
        str(item.get("layout", LAYOUT_FILES)),
        int(item.get("block_entries", 0)),
        int(item.get("blocks_per_file", 0)),
        item.get("streams", False) is True,
        [int(g) for g in item.get("queue_generation", [])],
        settings_from_json(item.get("settings"), item.get("name")),
        int(item.get("retained_from", 0)),
    )
    if info.layout not in LAYOUTS or (
        info.layout == LAYOUT_SHARED and (info.block_entries <= 0 or info.blocks_per_file <= 0)
    ):
        raise ValueError(info.layout)
    check_name(info.name, "topic")
    return info


class TopicTable:
    """``topics.json``: every topic, its queue count, and where in the log it began.

    ``created_offset`` keeps a re-created topic from picking up the records of a
    deleted one of the same name when consume queues are rebuilt from the log.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicInfo] = {}
        self.last_id = 0
        if path.exists():
            data = _load_json(path, TABLE_FIELDS)
            _verify_checksum(path, data)
            last_id = data.get("last_id", 0)
            self.last_id = last_id if isinstance(last_id, int) else 0
            try:
                for item in data.get("topics", []):
                    info = topic_from_json(item)
                    if not 1 <= info.queues <= MAX_QUEUES_IN_TABLE:
                        raise StoreFormatError(
                            f"{path} gives topic {info.name!r} {info.queues} queues, "
                            f"outside 1 to {MAX_QUEUES_IN_TABLE}"
                        )
                    self.topics[info.name] = info
                for info in sorted(self.topics.values(), key=lambda t: t.name):
                    if not info.id:
                        info.id = self.next_id()
            except InvalidNameError as error:
                raise StoreFormatError(f"{path} names a topic that is not valid: {error}") from None
            except (KeyError, TypeError, ValueError):
                raise StoreFormatError(f"{path} has a topic entry with missing fields") from None

    def next_id(self) -> int:
        """An id no topic has ever had in this store (ids are never reused)."""
        self.last_id = max(self.last_id, *(t.id for t in self.topics.values()), 0) + 1
        return self.last_id

    def save(self) -> None:
        self.save_changed()

    def save_changed(self, put: TopicInfo | None = None, remove: str | None = None) -> None:
        """Write the table with ``put`` added or replaced and ``remove`` gone, then make
        the same change here: a write that fails leaves the table as it was."""
        topics = dict(self.topics)
        if put is not None:
            topics[put.name] = put
        if remove is not None:
            del topics[remove]
        data = {
            "version": FORMAT_VERSION,
            "last_id": self.last_id,
            # Field by field: asdict copies every item of the per-queue lists, ~1 s for
            # a topic of a million queues.
            "topics": [_topic_json(t) for t in topics.values()],
        }
        fileio.write_atomic(self.path, _dump_checked(data))
        self.topics.clear()
        self.topics.update(topics)


def is_store(path: Path) -> bool:
    """Whether ``path`` is a Tidemark store (its store.json, or the commit log of one
    whose store.json was lost)."""
    return path.is_dir() and ((path / "store.json").is_file() or (path / "commitlog").is_dir())
