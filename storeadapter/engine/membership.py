"""Consumer-group membership shared by processes, through small files in the store.

Each live member of a group keeps ``<store>/groups/<group>/members/<consumer_id>.json``
fresh by rewriting it (atomically) every heartbeat. A member whose file is older than
``member_timeout_s`` is dead: whoever lists the group next removes its file, and the
group's queues are divided again over the members left (``allocate``, RocketMQ's
AllocateMessageQueueAveragely).

Heartbeat times are wall-clock milliseconds, so every process of one machine agrees on
them; members on different machines sharing a store need clocks in step to well within
``member_timeout_s``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from . import clock, fileio
from .names import MAX_NAME_LENGTH, check_name

GROUPS_DIR = "groups"
MEMBERS_DIR = "members"


class MemberInfo(NamedTuple):
    """One member's last heartbeat: who it is, what it subscribes to, what it holds."""

    consumer_id: str
    pid: int
    host: str
    topics: list[str]
    started_ms: int
    heartbeat_ms: int
    queues: list[tuple[str, int]]


def members_dir(store_path: str | os.PathLike, group: str) -> Path:
    """The directory holding a group's member files."""
    return Path(store_path) / GROUPS_DIR / check_name(group, "group") / MEMBERS_DIR


def check_consumer_id(consumer_id: object) -> str:
    """Return ``consumer_id`` if valid (letters, digits, . _ -), else raise InvalidNameError."""
    return check_name(consumer_id, "consumer id")


def default_consumer_id() -> str:
    """``<hostname>-<pid>-<random hex>``, with anything a name may not hold replaced."""
    suffix = f"-{os.getpid()}-{secrets.token_hex(4)}"
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
    host = host[: MAX_NAME_LENGTH - len(suffix)]
    return host + suffix


def heartbeat(
    store_path: str | os.PathLike,
    group: str,
    consumer_id: str,
    topics: Iterable[str],
    now_ms: int | None = None,
    *,
    queues: Iterable[tuple[str, int]] = (),
    started_ms: int | None = None,
) -> MemberInfo:
    """Write (atomically) the member's file with a fresh ``heartbeat_ms`` and return it.

    ``queues`` is what the member holds now (shown by ``group_members``); ``started_ms``
    defaults to the value already in the file, or now for a new member.
    """
    check_consumer_id(consumer_id)
    directory = members_dir(store_path, group)
    now = clock.now_ms() if now_ms is None else int(now_ms)
    path = directory / f"{consumer_id}.json"
    if started_ms is None:
        previous = _read_member(path)
        started_ms = previous.started_ms if previous is not None else now
    info = MemberInfo(
        consumer_id,
        os.getpid(),
        socket.gethostname(),
        sorted(set(topics)),
        int(started_ms),
        now,
        sorted((str(t), int(q)) for t, q in queues),
    )
    fileio.make_dir(directory, parents=True, exist_ok=True)
    data = info._asdict()
    data["queues"] = [list(q) for q in info.queues]
    fileio.write_atomic(path, json.dumps(data, separators=(",", ":")).encode())
    return info


def leave(store_path: str | os.PathLike, group: str, consumer_id: str) -> None:
    """Remove the member's file, so the others take its queues at their next heartbeat."""
    check_consumer_id(consumer_id)
    with contextlib.suppress(FileNotFoundError):
        fileio.unlink(members_dir(store_path, group) / f"{consumer_id}.json", missing_ok=False)


def _read_member(path: Path) -> MemberInfo | None:
    try:
        data = json.loads(path.read_bytes())
        return MemberInfo(
            str(data["consumer_id"]),
            int(data["pid"]),
            str(data["host"]),
            [str(t) for t in data["topics"]],
            int(data["started_ms"]),
            int(data["heartbeat_ms"]),
            [(str(t), int(q)) for t, q in data.get("queues", ())],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def live_members(
    store_path: str | os.PathLike,
    group: str,
    member_timeout_s: float,
    now_ms: int | None = None,
) -> list[MemberInfo]:
    """The group's members heard from within ``member_timeout_s``, sorted by consumer id.

    Files of members that missed their heartbeats for longer are removed.
    """
    directory = members_dir(store_path, group)
    now = clock.now_ms() if now_ms is None else int(now_ms)
    oldest = now - int(member_timeout_s * 1000)
    try:
        paths = [p for p in directory.iterdir() if p.suffix == ".json" and p.name[0] != "."]
    except FileNotFoundError:
        return []
    members = []
    for path in paths:
        info = _read_member(path)
        if info is None:
            continue
        if info.heartbeat_ms < oldest:
            # Look once more just before removing: the member may have just written.
            again = _read_member(path)
            if again is None or again.heartbeat_ms < oldest:
                with contextlib.suppress(FileNotFoundError):
                    fileio.unlink(path, missing_ok=False)
                continue
            info = again
        members.append(info)
    members.sort(key=lambda m: m.consumer_id)
    return members


def allocate(
    queues: Sequence[tuple[str, int]], members: Sequence[str], me: str
) -> list[tuple[str, int]]:
    """The queues ``me`` holds when ``queues`` are divided over ``members`` on average.

    RocketMQ's AllocateMessageQueueAveragely: both lists are sorted; with Q queues and
    M members, each member gets Q // M consecutive queues and the first Q % M members
    one more; with more members than queues the last members get none. A member not in
    ``members`` gets nothing. Every member computing this from the same lists gets a
    disjoint share, and together the shares cover every queue.
    """
    ordered_members = sorted(set(members))
    ordered_queues = sorted(set(queues))
    if me not in ordered_members or not ordered_queues:
        return []
    index = ordered_members.index(me)
    count, extra = divmod(len(ordered_queues), len(ordered_members))
    if index < extra:
        start = index * (count + 1)
        size = count + 1
    else:
        start = extra * (count + 1) + (index - extra) * count
        size = count
    return ordered_queues[start : start + size]


def group_members(
    store_path: str | os.PathLike, group: str, member_timeout_s: float, now_ms: int | None = None
) -> list[dict]:
    """For the console: each live member, the queues it holds, and its last heartbeat.

    ``queues`` is what the member reported holding at its last heartbeat, as
    ``[topic, queue]`` pairs; ``heartbeat_age_ms`` is how long ago that was.
    """
    now = clock.now_ms() if now_ms is None else int(now_ms)
    return [
        {
            "consumer_id": m.consumer_id,
            "pid": m.pid,
            "host": m.host,
            "topics": list(m.topics),
            "queues": [list(q) for q in m.queues],
            "started_ms": m.started_ms,
            "heartbeat_ms": m.heartbeat_ms,
            "heartbeat_age_ms": max(0, now - m.heartbeat_ms),
        }
        for m in live_members(store_path, group, member_timeout_s, now)
    ]


__all__ = [
    "MemberInfo",
    "allocate",
    "check_consumer_id",
    "default_consumer_id",
    "group_members",
    "heartbeat",
    "leave",
    "live_members",
    "members_dir",
]
