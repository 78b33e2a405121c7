"""Shared pieces of the fault tests: store settings, self-checking bodies, the writer
the tests kill, acknowledgement files, and the store invariants checked after a fault.

A body carries its own checksum (``body_is_intact``), so any message read back can be
checked without knowing who wrote it. A writer appends an acknowledgement line for a
message only after the engine returned it as stored, in one ``write`` per append call
on a file opened with O_APPEND: a kill leaves whole lines and at most one cut line,
which ``read_acks`` ignores (that append's messages were never acknowledged).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from storeadapter.engine import STATUS_OK, Message, MessageStore, StoreConfig, StoredMessage

if TYPE_CHECKING:
    from tests.faults.forkserver import Child, ForkServer

TOPIC = "t"
QUEUES = 4
SEGMENT_BYTES = 4096  # the smallest allowed: a roll every dozen records or so
QUEUE_FILE_ENTRIES = 16  # a new consume-queue file every 16 messages of a queue
DIGEST = 16
WRITER = "tests.faults.faultharness:append_forever"


def fault_config(mode: str = "sync", **overrides: object) -> StoreConfig:
    """Tiny segments, queue files and key-index files; a fast async flusher."""
    settings: dict = {
        "segment_bytes": SEGMENT_BYTES,
        "max_message_bytes": 1024,
        "queue_file_entries": QUEUE_FILE_ENTRIES,
        "index_slots": 64,
        "index_entries": 512,
        "stream_index_slots": 16,
        "flush_mode": mode,
        "flush_interval_ms": 20,
        "disk_warn_ratio": 1.0,
        "disk_force_ratio": 1.0,
        "disk_reject_ratio": 1.0,
    }
    return StoreConfig(**{**settings, **overrides})


def create_store(path: Path, mode: str = "sync", queues: int = QUEUES) -> None:
    with MessageStore.open(path, fault_config(mode)) as store:
        store.create_topic(TOPIC, queues=queues)


def make_body(rng: random.Random, label: str, number: int, max_extra: int = 300) -> bytes:
    rest = f"{label}:{number}:".encode() + rng.randbytes(rng.randrange(0, max_extra))
    return hashlib.sha256(rest).hexdigest()[:DIGEST].encode() + rest


def sized_body(label: str, number: int, size: int) -> bytes:
    """A self-checking body of about ``size`` bytes (``make_body`` without chance)."""
    rest = f"{label}:{number}:".encode() + b"s" * size
    return hashlib.sha256(rest).hexdigest()[:DIGEST].encode() + rest


def body_is_intact(body: bytes) -> bool:
    return body[:DIGEST] == hashlib.sha256(body[DIGEST:]).hexdigest()[:DIGEST].encode()


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:24]


@dataclass(frozen=True)
class Ack:
    """One acknowledged message, as the writer was told it was stored."""

    message_id: str
    queue: int
    queue_offset: int
    commit_offset: int
    digest: str

    def line(self) -> str:
        return (
            f"{self.message_id} {self.queue} {self.queue_offset} "
            f"{self.commit_offset} {self.digest}\n"
        )


def read_acks(path: Path) -> list[Ack]:
    """The whole acknowledgement lines of a file, in the order they were written."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]  # a last line without newline was cut
    acks = []
    for line in lines:
        message_id, queue, queue_offset, commit_offset, digest = line.split()
        acks.append(Ack(message_id, int(queue), int(queue_offset), int(commit_offset), digest))
    return acks


class AckWriter:
    """Appends acknowledgement lines, one ``write`` per call (see the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, results: Iterable, bodies: Iterable[bytes]) -> None:
        lines = [
            Ack(r.message_id, r.queue, r.queue_offset, r.commit_offset, body_digest(b)).line()
            for r, b in zip(results, bodies, strict=True)
            if r.status == STATUS_OK
        ]
        if lines:
            os.write(self.fd, "".join(lines).encode())


def append_some(
    store: MessageStore, rng: random.Random, label: str, number: int, acks: AckWriter
) -> int:
    """One append call (a single message, or a batch with keys); return how many."""
    if rng.random() < 0.25:
        bodies = [make_body(rng, label, number + i) for i in range(rng.randrange(2, 7))]
        messages = [Message(b, key=f"k{rng.randrange(16)}") for b in bodies]
        results = store.append_batch(TOPIC, messages)
    else:
        bodies = [make_body(rng, label, number)]
        results = [store.append(TOPIC, bodies[0], tag=rng.choice([None, "a", "b"]))]
    acks.write(results, bodies)
    return len(bodies)


def append_forever(
    path: str, mode: str, acks: str, seed: int, limit: int = 0, native: str = ""
) -> None:
    """A writer for the fork server: appends until killed (or ``limit`` messages).
    With ``native``, after each append call the file holds how many calls it made and
    how many of them the store core wrote (``read_native``)."""
    rng = random.Random(seed)
    writer = AckWriter(acks)
    store = MessageStore.open(path, fault_config(mode))
    report = os.open(native, os.O_WRONLY | os.O_CREAT, 0o644) if native else -1
    core = store._appender
    number = calls = 0
    while not limit or number < limit:
        number += append_some(store, rng, f"w{seed}", number, writer)
        calls += 1
        if report >= 0 and core is not None:
            os.pwrite(report, b"%20d %20d\n" % (calls, core.appended + core.batched), 0)
    store.close()


def read_native(path: Path) -> tuple[int, int]:
    """(append calls, of which the store core wrote) as a killed ``append_forever`` left."""
    if not path.exists() or not path.stat().st_size:
        return 0, 0
    calls, native = path.read_bytes().split()
    return int(calls), int(native)


# ------------------------------------------------------------------------ invariants


@dataclass
class StoreCheck:
    """What ``check_store`` found: every readable message by id, acks present or lost."""

    messages: dict[str, StoredMessage] = field(default_factory=dict)
    present: list[Ack] = field(default_factory=list)
    lost: list[Ack] = field(default_factory=list)
    removed: list[Ack] = field(default_factory=list)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    log_min: int = 0


def read_queue(store: MessageStore, topic: str, queue: int) -> list[StoredMessage]:
    low, high = store.queue_range(topic, queue)
    messages: list[StoredMessage] = []
    offset = low
    while offset < high:
        result = store.read_result(topic, queue, offset, 500)
        messages.extend(result.messages)
        assert result.next_offset > offset, f"read made no progress at {topic}/{queue}@{offset}"
        offset = result.next_offset
    return messages


def check_store(
    store: MessageStore, acked: Iterable[Ack], topic: str = TOPIC, context: str = ""
) -> StoreCheck:
    """Check the invariants every store must hold after any fault, and sort the acks.

    Every queue holds exactly the offsets min..max-1, each readable, in that queue,
    with an intact body, no message in two places; the store noted no corruption;
    each queue's first message lies in the commit log's remaining segments. An ack is
    *present* when its id reads back at its queue and offset with the same body,
    *removed* when retention deleted its segment (its commit offset is below the log's
    minimum), else *lost*.
    """
    found = StoreCheck()
    stats = store.stats()
    found.log_min = stats.commit_log.min_offset
    assert stats.corruptions == [], f"{context}: corruptions {stats.corruptions}"
    for queue in range(store.topic(topic).queues):
        low, high = store.queue_range(topic, queue)
        found.ranges[queue] = (low, high)
        messages = read_queue(store, topic, queue)
        offsets = [m.queue_offset for m in messages]
        assert offsets == list(range(low, high)), (
            f"{context}: queue {queue} has offsets {_spans(offsets)}, not {low}..{high - 1}"
        )
        for message in messages:
            assert message.queue == queue and message.topic == topic, context
            assert body_is_intact(message.body), f"{context}: damaged {message.message_id}"
            assert message.commit_offset >= found.log_min, (
                f"{context}: {message.message_id} is below the log's min {found.log_min}"
            )
            assert message.message_id not in found.messages, (
                f"{context}: {message.message_id} is in two places"
            )
            found.messages[message.message_id] = message
    for ack in acked:
        message = found.messages.get(ack.message_id)
        if (
            message is not None
            and (message.queue, message.queue_offset) == (ack.queue, ack.queue_offset)
            and body_digest(message.body) == ack.digest
        ):
            found.present.append(ack)
        elif ack.commit_offset < found.log_min:
            found.removed.append(ack)
        else:
            found.lost.append(ack)
    return found


def _spans(offsets: list[int]) -> str:
    """Offsets as runs ("0-9, 11-20"), for assertion messages."""
    if not offsets:
        return "none"
    runs, start, previous = [], offsets[0], offsets[0]
    for offset in offsets[1:]:
        if offset != previous + 1:
            runs.append(f"{start}-{previous}")
            start = offset
        previous = offset
    runs.append(f"{start}-{previous}")
    return ", ".join(runs[:20])


# ---------------------------------------------------------------------- kill points


def arm_kill(
    target: str,
    when: str = "before",
    nth: int = 1,
    caller: str | None = None,
    where: str | None = None,
    pause_s: float = 0.0,
    mark: str | None = None,
    before_death: Callable[[], None] | None = None,
) -> None:
    """In a child: SIGKILL this process at the ``nth`` matching call of ``target``.

    ``target`` is "module:attribute" or "module:Class.method"; the call matches when
    ``caller`` (a function's qualified name, e.g. "Segment.create") is on the stack just
    above it (within 8 frames) and ``where`` (a Python expression over ``args``) holds.
    ``when`` is "before" the call or "after" it returned; ``pause_s`` is a sleep just
    before the kill (for another process to start waiting), and the file ``mark`` is
    created when the kill point is reached; ``before_death`` is called just before the
    kill (to hand over a power-loss model, ``FaultyFS.save_model``). Only test processes use this:
    the engine has no hooks, its functions are replaced at run time.
    """
    import importlib
    import signal
    import sys
    import threading

    module_name, attribute = target.split(":")
    owner = importlib.import_module(module_name)
    *parents, name = attribute.split(".")
    for part in parents:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    lock = threading.Lock()
    calls = [0]

    def matches(args: tuple) -> bool:
        if where is not None and not eval(where, {"args": args}):  # noqa: S307 - test-only
            return False
        if caller is None:
            return True
        frame = sys._getframe(2)
        for _ in range(8):
            if frame is None:
                return False
            if frame.f_code.co_qualname == caller:
                return True
            frame = frame.f_back
        return False

    def die() -> None:
        if mark is not None:
            Path(mark).touch()
        if before_death is not None:
            before_death()
        time.sleep(pause_s)
        os.kill(os.getpid(), signal.SIGKILL)

    def wrapper(*args: object, **kwargs: object) -> object:
        if matches(args):
            with lock:
                calls[0] += 1
                hit = calls[0] == nth
            if hit and when == "before":
                die()
            if hit:
                result = original(*args, **kwargs)
                die()
                return result
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def kill(target: str, when: str = "before", nth: int = 1, **match: str) -> dict:
    """A kill point at an engine function (``target``: ``module:Qualified.name`` under
    ``storeadapter.engine``), ``before`` or ``after`` its ``nth`` call."""
    return {"target": f"storeadapter.engine.{target}", "when": when, "nth": nth, **match}


def at_site(site: str, when: str = "before", nth: int = 1, where: str | None = None) -> dict:
    """A kill point at a site of the fault seam (``arm_site_kill``): the store core keeps
    writing, and the kill comes at the site whichever path reaches it."""
    return {"site": site, "when": when, "nth": nth, "where": where}


def arm_site_kill(
    fs,
    store: MessageStore,
    native: str,
    site: str,
    when: str = "before",
    nth: int = 1,
    where: str | None = None,
) -> None:
    """In a child: SIGKILL this process at the ``nth`` call at ``site`` of the fault plan
    ``fs`` (tests/faults/faultyfs.py, ``kill_at``) for which ``where`` (a Python
    expression over ``path`` and ``offset``) holds; just before, write the store core's
    appends and batches so far to the file ``native``."""

    def report() -> None:
        core = store._appender
        done = (0, 0) if core is None else (core.appended, core.batched)
        if native:
            Path(native).write_text(f"{done[0]} {done[1]}")

    matches = None
    if where is not None:
        code = compile(where, "<where>", "eval")
        matches = lambda path, offset: eval(code, {"path": path, "offset": offset})  # noqa: E731, S307
    fs.kill_at(site, nth, when, before_death=report, where=matches)


def populate(path: Path, mode: str, count: int, seed: int, acks_path: Path) -> list[Ack]:
    """Append ``count`` messages in this process (the store is closed after)."""
    rng = random.Random(seed)
    writer = AckWriter(acks_path)
    with MessageStore.open(path, fault_config(mode)) as store:
        number = 0
        while number < count:
            number += append_some(store, rng, f"p{seed}", number, writer)
    os.close(writer.fd)
    return read_acks(acks_path)


def write_until_killed(
    path: str, mode: str, acks: str, seed: int, kill: dict, limit: int, native: str = ""
) -> None:
    """A child: open the store, arm the kill point, append up to ``limit`` messages.

    A kill point at a site (``{"site": ...}``: ``arm_site_kill``) is armed in a fault
    plan with native sites, so the store core keeps writing and the kill comes at the
    site whichever path reaches it; the core's appends and batches until then are
    written to the file ``native`` just before the kill."""
    rng = random.Random(seed)
    writer = AckWriter(acks)
    if "site" in kill:
        from tests.faults.faultyfs import FaultyFS

        fs = FaultyFS(Path(path))
        fs.install()
        store = MessageStore.open(path, fault_config(mode))
        arm_site_kill(fs, store, native, **kill)
    else:
        store = MessageStore.open(path, fault_config(mode))
        arm_kill(**kill)
    number = 0
    while number < limit:
        number += append_some(store, rng, f"k{seed}", number, writer)
    store.close()


def open_until_killed(path: str, mode: str, kill: dict) -> None:
    """A child: arm the kill point, then open (recover) and close the store."""
    arm_kill(**kill)
    MessageStore.open(path, fault_config(mode)).close()


def expire_until_killed(path: str, mode: str, kill: dict, now_ms: int) -> None:
    """A child: open the store, arm the kill point, run retention as of ``now_ms``."""
    store = MessageStore.open(path, fault_config(mode))
    arm_kill(**kill)
    store.delete_expired(now_ms=now_ms)
    store.close()


def commit_until_killed(
    path: str, mode: str, progress: str, kill: dict, count: int, compact_bytes: int
) -> None:
    """A child: commit offsets (three groups, every queue) and log each one's progress.

    Before each commit it writes ``intent GROUP QUEUE OFFSET``, after it ``done ...``.
    The journal is compacted every ``compact_bytes``.
    """
    from storeadapter.engine import offsets

    offsets.OffsetStore.__init__.__defaults__ = (compact_bytes, True)
    store = MessageStore.open(path, fault_config(mode))
    arm_kill(**kill)
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for number in range(count):
        group, queue = f"g{number % 3}", number % QUEUES
        low, high = store.queue_range(TOPIC, queue)
        offset = low + (number * 7) % (high - low + 1)
        os.write(fd, f"intent {group} {queue} {offset}\n".encode())
        store.commit_offset(group, TOPIC, queue, offset)
        os.write(fd, f"done {group} {queue} {offset}\n".encode())
    store.close()


def open_and_report(path: str, mode: str, out: str) -> None:
    """A child: open the store, then write (JSON) whether the abort marker exists and
    when this process's recovery finished (0: it ran none, it joined others)."""
    import json

    began_ms = time.time_ns() // 1_000_000
    store = MessageStore.open(path, fault_config(mode))
    recovered = store.last_recovery.finished_ms
    report = {
        "abort_marker": (Path(path) / "abort").exists(),
        "recovered_here": recovered >= began_ms,
    }
    Path(out).write_text(json.dumps(report))
    store.close()


def start_holder(server: ForkServer, tmp_path: Path, path: Path, mode: str) -> Child:
    """Fork a member that keeps the store open (``hold_open``), so that writers join
    instead of recovering; return it once the store is open."""
    ready = tmp_path / "ready"
    holder = server.spawn(
        "tests.faults.faultharness:hold_open",
        tmp_path / "holder.stderr",
        path=str(path),
        mode=mode,
        ready=str(ready),
    )
    while not ready.exists():
        assert holder.poll() is None, holder.poll()
        time.sleep(0.01)
    return holder


def hold_open(path: str, mode: str, ready: str) -> None:
    """A child: keep the store open (a member that does nothing) until killed."""
    store = MessageStore.open(path, fault_config(mode))
    Path(ready).write_text("open")
    while not store.closed:
        time.sleep(1)


def append_small(path: str, mode: str, acks: str, keyed: bool = False) -> None:
    """A child: append one small message (``keyed``: two, with a key) and close."""
    writer = AckWriter(acks)
    rng = random.Random(0)
    bodies = [make_body(rng, "small", n, max_extra=1) for n in range(2 if keyed else 1)]
    with MessageStore.open(path, fault_config(mode)) as store:
        if keyed:
            results = store.append_batch(TOPIC, [Message(b, key="k1") for b in bodies])
        else:
            results = [store.append(TOPIC, bodies[0])]
        writer.write(results, bodies)


def expire_once(path: str, mode: str, now_ms: int) -> None:
    """A child: open the store, run retention as of ``now_ms``, close."""
    with MessageStore.open(path, fault_config(mode)) as store:
        store.delete_expired(now_ms=now_ms)


def append_then_die(
    path: str, mode: str, acks: str, count: int, group: str, overrides: dict | None = None
) -> None:
    """A child: append ``count`` messages, commit ``group`` to every queue's end, then die
    by SIGKILL (a crash with nothing closed or flushed on the way out)."""
    import signal

    rng = random.Random(7)
    writer = AckWriter(acks)
    store = MessageStore.open(path, fault_config(mode, **(overrides or {})))
    number = 0
    while number < count:
        bodies = [make_body(rng, "d", number)]
        writer.write([store.append(TOPIC, bodies[0])], bodies)
        number += 1
    for queue in range(store.topic(TOPIC).queues):
        low, high = store.queue_range(TOPIC, queue)
        if high > low:
            store.commit_offset(group, TOPIC, queue, high)
    os.kill(os.getpid(), signal.SIGKILL)


def batch_until_killed(
    path: str, mode: str, kill: dict, bodies: list[str], overrides: dict | None = None
) -> None:
    """A child: open the store, arm the kill point, append one batch of ``bodies`` (hex).

    The batch is never acknowledged: the kill point is meant to be inside it."""
    store = MessageStore.open(path, fault_config(mode, **(overrides or {})))
    arm_kill(**kill)
    store.append_batch(TOPIC, [bytes.fromhex(body) for body in bodies])
    store.close()


def delete_topic_until_killed(path: str, mode: str, kill: dict, topic: str) -> None:
    """A child: open the store, arm the kill point, delete ``topic``."""
    store = MessageStore.open(path, fault_config(mode))
    arm_kill(**kill)
    store.delete_topic(topic)
    store.close()


def hold_open_with(path: str, mode: str, ready: str, overrides: dict) -> None:
    """``hold_open`` for a store made with other settings than ``fault_config``'s."""
    store = MessageStore.open(path, fault_config(mode, **overrides))
    Path(ready).write_text("open")
    while not store.closed:
        time.sleep(1)


def append_to_queue_until_killed(path: str, mode: str, kill: dict, queue: int, body: str) -> None:
    """A child: open the store, arm the kill point, append ``body`` (hex) to ``queue``.

    Never acknowledged: the kill point is meant to be inside the append."""
    store = MessageStore.open(path, fault_config(mode))
    arm_kill(**kill)
    store.append(TOPIC, bytes.fromhex(body), queue=queue)
    store.close()


def append_flush_then_die(
    path: str, mode: str, acks: str, queues: list[int], then: list[int] = ()
) -> None:
    """A child: append a message to each of ``queues`` in turn, flush (a checkpoint past
    them), append one to each of ``then``, then die by SIGKILL with nothing closed."""
    import signal

    rng = random.Random(11)
    writer = AckWriter(acks)
    store = MessageStore.open(path, fault_config(mode))
    for number, queue in enumerate([*queues, None, *then]):
        if queue is None:
            store.flush()
            continue
        bodies = [make_body(rng, "f", number)]
        writer.write([store.append(TOPIC, bodies[0], queue=queue)], bodies)
    os.kill(os.getpid(), signal.SIGKILL)
