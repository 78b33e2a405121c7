"""Power loss at any moment: what an fsync covered survives it (issue 8).

A seeded workload (topic creation, single appends and batches over several queues and
segment rolls, one topic of the shared layout, offset commits, flushes, retention forced
by a full fake disk) runs on a store under FaultyFS. Power-loss
images are captured after every operation and at every few file-system calls in the
middle of operations (the flusher thread's included). Each image is opened by a fresh
store (recovery), and what it holds is compared with what had been acknowledged when
the image was taken:

* ``sync``: every append that had returned OK is there, intact, at its queue offset;
* ``async``: every append that returned before the last completed ``flush()`` is;
* both: queues have no hole up to their last acknowledged message and hold only
  messages that were written (under ``sync`` with only fsynced bytes kept, no hole at
  all), topics whose creation returned exist, committed offsets that were acknowledged
  are kept, keys are found, and the store takes new appends at the queues' ends;
* messages in segments that retention deleted (or was deleting) may be gone;
* a power loss during the recovery of such an image, then recovery again, loses nothing
  acknowledged either.

Variants: ``durable`` (only fsynced bytes and fsynced directory entries survive),
``torn`` (plus a random prefix of each file's unsynced writes, the last one cut short),
``live-entries`` (every directory change survived, with torn file contents, and the
mapped ``state`` file as it was).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storeadapter.engine import Message, MessageStore, RecoveryReport, StoreConfig
from tests.engine.storetools import read_all, small_config
from tests.faults.faultyfs import FaultyFS, PowerLossImage, skip_syncs
from tests.faults.modulework import ModuleWork
from tests.faults.soak import rounds

work = ModuleWork("power-loss")
module_work = work.fixture()

SEEDS = (1, 2)
OPERATIONS = 70
MID_OPERATION_EVERY = 29  # capture an image at every Nth file-system call as well
VARIANTS = ("durable", "torn", "pages", "live-entries")
# Each variant opens every IMAGE_STRIDE-th image of a run, the variants starting at
# different images: under make test every image is opened once, by the four variants in
# turn (durable, torn, pages, live-entries, durable, ...); make soak opens every image in
# every variant.
IMAGE_STRIDE = rounds(len(VARIANTS), 1)
KEYS = ("k0", "k1", "k2", "k3", "k4")
GROUPS = ("g1", "g2")


def store_config(mode: str) -> StoreConfig:
    return small_config(
        flush_mode=mode,
        queue_file_entries=16,  # queue files roll too
        flush_interval_ms=600_000,  # only explicit flushes, so "last flush" is known
        flush_timeout_ms=600_000,
        disk_warn_ratio=0.79,
        disk_force_ratio=0.8,
        disk_reject_ratio=0.95,
        shared_block_entries=8,  # topic t1 is shared: small block files
        shared_blocks_per_file=16,
    )


# The workload's fake disk: ten segments. Retention runs with use at FORCED, which
# deletes the oldest segment (unexpired) to get under disk_warn_ratio.
DISK = 10 * 4096
CALM = (DISK // 10, DISK)
FORCED = (int(DISK * 0.805), DISK)


@dataclass(frozen=True)
class Sent:
    message_id: str
    topic: str
    queue: int
    queue_offset: int
    body: bytes
    key: str | None


@dataclass
class Acknowledged:
    """What the workload had been told was done, at one moment."""

    messages: int  # the first N of Workload.sent
    flushed: int  # the first N of Workload.sent were acknowledged before the last flush()
    topics: tuple[str, ...]
    offsets: dict
    # Messages below this commit offset may be gone: retention deleted (or was deleting)
    # their segments.
    floor: int


@dataclass
class Workload:
    rng: random.Random
    sent: list[Sent] = field(default_factory=list)
    topics: dict[str, int] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    flushed: int = 0
    floor: int = 0
    fs: FaultyFS | None = None

    def acknowledged(self) -> Acknowledged:
        return Acknowledged(
            len(self.sent), self.flushed, tuple(self.topics), dict(self.offsets), self.floor
        )

    def step(self, store: MessageStore) -> None:
        rng = self.rng
        if not self.topics or (len(self.topics) < 3 and rng.random() < 0.06):
            name = f"t{len(self.topics)}"
            queues = rng.randint(1, 3)
            store.create_topic(name, queues=queues, layout="shared" if name == "t1" else "files")
            self.topics[name] = queues
            return
        choice = rng.random()
        topic = rng.choice(sorted(self.topics))
        if choice < 0.45:
            body = rng.randbytes(rng.randint(1, 400))
            key = rng.choice((None, *KEYS))
            result = store.append(topic, body, key=key, tag=rng.choice((None, "a", "b")))
            self._note(result, body, key)
        elif choice < 0.8:
            messages = [
                Message(rng.randbytes(rng.randint(1, 300)), key=rng.choice((None, *KEYS)))
                for _ in range(rng.randint(2, 7))
            ]
            results = store.append_batch(topic, messages)
            for result, message in zip(results, messages, strict=True):
                self._note(result, message.body, message.key)
        elif choice < 0.93:
            queue = rng.randrange(self.topics[topic])
            group = rng.choice(GROUPS)
            high = store.queue_range(topic, queue)[1]
            low = self.offsets.get((group, topic, queue), 0)
            if high > low:
                offset = rng.randint(low + 1, high)
                store.commit_offset(group, topic, queue, offset)
                self.offsets[(group, topic, queue)] = offset
        elif choice < 0.97 or self.fs is None:
            store.flush()
            self.flushed = len(self.sent)
        else:
            self.floor = store.stats().segments[-1].base  # what may go meanwhile
            self.fs.fake_usage = FORCED
            store.delete_expired()
            self.fs.fake_usage = CALM
            self.floor = store.stats().commit_log.min_offset

    def _note(self, result, body: bytes, key: str | None) -> None:
        assert result.status == "OK", result
        self.sent.append(
            Sent(result.message_id, result.topic, result.queue, result.queue_offset, body, key)
        )


@dataclass
class Run:
    images: list[PowerLossImage]
    sent: list[Sent]
    directory: Path


@work.cached
def run_workload(mode: str, seed: int) -> Run:
    """Run the workload once per mode and seed, capturing images as it goes."""
    directory = work.directory(f"{mode}-{seed}")
    path = directory / "store"
    workload = Workload(random.Random(seed))
    images: list[PowerLossImage] = []
    calls = 0

    def mid_operation(op: str) -> None:
        nonlocal calls
        calls += 1
        if calls % MID_OPERATION_EVERY == 0:
            images.append(fs.capture(f"call {calls} ({op})", workload.acknowledged()))

    with FaultyFS(path) as fs:
        fs.fake_usage = CALM
        workload.fs = fs
        store = MessageStore.open(path, store_config(mode))
        fs.on_op = mid_operation
        try:
            for step in range(OPERATIONS):
                workload.step(store)
                images.append(fs.capture(f"after operation {step}", workload.acknowledged()))
        finally:
            fs.on_op = None
            store.close()
    return Run(images, workload.sent, directory)


@dataclass
class Observation:
    """What a store opened on one image holds."""

    label: str
    acknowledged: Acknowledged
    topics: set[str]
    queues: dict[tuple[str, int], list]  # every readable message, per queue
    ranges: dict[tuple[str, int], tuple[int, int]]
    got: dict[str, object]  # message id -> StoredMessage or the error get() raised
    by_key: dict[tuple[str, str], set[str]]
    offsets: dict[tuple[str, str, int], int | None]
    recovery: RecoveryReport
    appended_after: dict[str, tuple[int, int]]  # topic -> (queue max before, new offset)


def observe(image: PowerLossImage, path: Path, sent: list[Sent], mode: str) -> Observation:
    acknowledged: Acknowledged = image.meta
    with skip_syncs(), MessageStore.open(path, store_config("async")) as store:
        topics = {info.name: info.queues for info in store.topics()}
        queues = {
            (name, q): read_all(store, name, q) for name, n in topics.items() for q in range(n)
        }
        ranges = {key: store.queue_range(*key) for key in queues}
        got = {}
        for item in sent:
            try:
                got[item.message_id] = store.get(item.message_id)
            except Exception as error:  # noqa: BLE001 - recorded, judged by the tests
                got[item.message_id] = error
        by_key = {}
        for name in topics:
            for key in KEYS:
                found = store.query_by_key(name, key, limit=1000)
                by_key[(name, key)] = {m.message_id for m in found}
        offsets = {
            key: store.committed_offset(*key) if key[1] in topics else None
            for key in acknowledged.offsets
        }
        recovery = store.stats().last_recovery
        appended_after = {}
        for name in topics:
            before = store.queue_range(name, 0)[1]
            appended_after[name] = (before, store.append(name, b"after", queue=0).queue_offset)
    return Observation(
        image.label,
        acknowledged,
        set(topics),
        queues,
        ranges,
        got,
        by_key,
        offsets,
        recovery,
        appended_after,
    )


@work.cached
def observations(mode: str, seed: int, variant: str) -> list[Observation]:
    run = run_workload(mode, seed)
    rng = random.Random(seed * 1000 + VARIANTS.index(variant))
    result = []
    first = VARIANTS.index(variant) % IMAGE_STRIDE
    for number, image in enumerate(run.images):
        if number % IMAGE_STRIDE != first:
            continue
        path = run.directory / f"{variant}-{number}"
        image.materialize(
            path,
            torn=rng if variant in ("torn", "live-entries") else None,
            pages=rng if variant == "pages" else None,
            live_entries=variant == "live-entries",
            live_state=variant == "live-entries",
        )
        result.append(observe(image, path, run.sent, mode))
    return result


def required(observation: Observation, sent: list[Sent], mode: str) -> list[Sent]:
    """The messages this image must hold."""
    acknowledged = observation.acknowledged
    done = sent[: acknowledged.messages if mode == "sync" else acknowledged.flushed]
    return [item for item in done if int(item.message_id[8:], 16) >= acknowledged.floor]


CASES = [
    (mode, seed, variant) for mode in ("sync", "async") for seed in SEEDS for variant in VARIANTS
]
IDS = [f"{mode}-seed{seed}-{variant}" for mode, seed, variant in CASES]


def _failures(case, check) -> list[str]:
    mode, seed, variant = case
    sent = run_workload(mode, seed).sent
    problems = []
    for observation in observations(mode, seed, variant):
        for problem in check(observation, sent, mode):
            problems.append(f"{observation.label}: {problem}")
    return problems


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_acknowledged_message_is_there_intact_after_power_loss(case):
    """sync: every append that returned; async: every append before the last flush()."""

    def check(observation, sent, mode):
        for item in required(observation, sent, mode):
            got = observation.got[item.message_id]
            if isinstance(got, Exception) or got.body != item.body:
                yield f"{item.message_id} ({item.topic}/{item.queue}@{item.queue_offset}): {got!r}"
                continue
            readable = observation.queues.get((item.topic, item.queue), [])
            at = [m for m in readable if m.queue_offset == item.queue_offset]
            if [m.message_id for m in at] != [item.message_id]:
                yield f"{item.message_id} not read at {item.topic}/{item.queue}@{item.queue_offset}"

    assert _failures(case, check) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_queues_hold_only_messages_that_were_written_after_power_loss(case):
    def check(observation, sent, mode):
        written = {item.message_id: item for item in sent}
        for (topic, queue), messages in observation.queues.items():
            for message in messages:
                item = written.get(message.message_id)
                if item is None or (item.topic, item.queue, item.queue_offset, item.body) != (
                    message.topic,
                    message.queue,
                    message.queue_offset,
                    message.body,
                ):
                    yield f"{topic}/{queue}@{message.queue_offset} was never written: {message!r}"

    assert _failures(case, check) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_acknowledged_part_of_every_queue_has_no_hole_after_power_loss(case):
    """Up to its last acknowledged message, a queue reads back as 0, 1, 2, ... (past it,
    an unflushed window may have lost a segment's pages but kept a later segment's)."""

    def check(observation, sent, mode):
        must: dict[tuple[str, int], list[int]] = {}
        for item in required(observation, sent, mode):
            must.setdefault((item.topic, item.queue), []).append(item.queue_offset)
        for key, acknowledged in must.items():
            offsets = {m.queue_offset for m in observation.queues.get(key, [])}
            wanted = set(range(min(acknowledged), max(acknowledged) + 1))
            if not wanted <= offsets:
                yield f"{key} lacks offsets {sorted(wanted - offsets)} among the acknowledged"

    assert _failures(case, check) == []


SYNC_WHOLE = [case for case in CASES if case[0] == "sync" and case[2] == "durable"]


@pytest.mark.parametrize("case", SYNC_WHOLE, ids=[IDS[CASES.index(c)] for c in SYNC_WHOLE])
def test_sync_queues_have_no_hole_at_all_when_only_fsynced_bytes_survive(case):
    """(With torn writes, a batch cut while it rolls to a new segment may keep records in
    the new segment and lose earlier ones: never acknowledged, so allowed above.)"""

    def check(observation, sent, mode):
        for (topic, queue), messages in observation.queues.items():
            low, high = observation.ranges[(topic, queue)]
            offsets = [m.queue_offset for m in messages]
            if offsets != list(range(low, high)):
                yield f"{topic}/{queue} holds offsets {offsets}, its range is {low}..{high}"

    assert _failures(case, check) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_acknowledged_keys_are_found_by_query_after_power_loss(case):
    def check(observation, sent, mode):
        for item in required(observation, sent, mode):
            if item.key and item.message_id not in observation.by_key[(item.topic, item.key)]:
                yield f"{item.message_id} not found under key {item.key!r}"

    assert _failures(case, check) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_created_topics_and_committed_offsets_survive_power_loss(case):
    def check(observation, sent, mode):
        acknowledged = observation.acknowledged
        missing = set(acknowledged.topics) - observation.topics
        if missing:
            yield f"topics {sorted(missing)} lost"
        clamped = {
            (c["group"], c["topic"], c["queue"]): c for c in observation.recovery.offsets_clamped
        }
        for key, offset in acknowledged.offsets.items():
            kept = observation.offsets[key]
            if kept is not None and kept >= offset:  # the workload only moves offsets forward
                continue
            # The commit outlived the messages it passed: they were in the unflushed window
            # (async), or retention deleted them and the power loss took their queue's
            # entries. Recovery sets the commit back to the queue's end, and says so.
            clamp = clamped.get(key)
            if clamp and kept == clamp["end"] < offset <= clamp["committed"]:
                passed = [
                    (number, item)
                    for number, item in enumerate(sent)
                    if (item.topic, item.queue) == key[1:] and kept <= item.queue_offset < offset
                ]
                if all(
                    int(item.message_id[8:], 16) < acknowledged.floor
                    or (mode == "async" and number >= acknowledged.flushed)
                    for number, item in passed
                ):
                    continue
            yield f"offset {key} is {kept}, {offset} was acknowledged"

    assert _failures(case, check) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_store_recovered_from_power_loss_takes_new_appends_at_the_queue_end(case):
    def check(observation, sent, mode):
        for topic, (before, offset) in observation.appended_after.items():
            if offset != before:
                yield f"append to {topic}/0 got offset {offset}, the queue ended at {before}"

    assert _failures(case, check) == []


def test_power_loss_images_cover_mid_operation_cuts_segment_rolls_and_losses():
    """The workload is rich enough to mean something: images cut inside operations,
    the log spans several segments, and some images do lose unacknowledged data."""
    run = run_workload("async", SEEDS[0])
    labels = [image.label for image in run.images]
    assert sum(label.startswith("call") for label in labels) >= 10
    assert len({item.queue_offset for item in run.sent}) > 16  # queue files rolled
    observed = observations("async", SEEDS[0], "durable")
    tails = [o.recovery.tail for o in observed]
    assert max(tails) > 3 * 4096
    lost = [o for o in observed if sum(map(len, o.queues.values())) < o.acknowledged.messages]
    assert lost, "no image lost anything: the layer drops nothing"


RECOVERY_IMAGES = 8  # images of each run whose recovery is itself cut by a power loss
DURING_RECOVERY_EVERY = 5


def _cut_recovery(image: PowerLossImage, path: Path) -> list[PowerLossImage]:
    """Recover ``path`` (an image of ``image``) under FaultyFS, capturing images as it goes."""
    captured: list[PowerLossImage] = []
    calls = 0

    def during_recovery(op: str) -> None:
        nonlocal calls
        calls += 1
        if calls % DURING_RECOVERY_EVERY == 0:
            captured.append(fs.capture(f"{image.label}, recovery call {calls}", image.meta))

    with FaultyFS(path) as fs:
        fs.adopt()
        fs.on_op = during_recovery
        MessageStore.open(path, store_config("async")).close()
    return captured


@work.cached
def observations_of_cut_recoveries(mode: str) -> list[Observation]:
    """Power losses while a store recovers from a power loss, then a recovery again."""
    run = run_workload(mode, SEEDS[0])
    rng = random.Random(99)
    step = max(1, len(run.images) // RECOVERY_IMAGES)
    result = []
    for number, image in enumerate(run.images[::step]):
        first = image.materialize(run.directory / f"recovering-{number}", torn=rng)
        for cut, second in enumerate(_cut_recovery(image, first)):
            path = run.directory / f"recovered-{number}-{cut}"
            second.materialize(path, torn=rng)
            result.append(observe(second, path, run.sent, mode))
    return result


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_power_loss_during_recovery_loses_nothing_acknowledged(mode):
    """Recovery can be cut at any point (torn writes too) and run again from scratch."""
    observed = observations_of_cut_recoveries(mode)
    sent = run_workload(mode, SEEDS[0]).sent
    problems = []
    for observation in observed:
        for item in required(observation, sent, mode):
            got = observation.got[item.message_id]
            if isinstance(got, Exception) or got.body != item.body:
                problems.append(f"{observation.label}: {item.message_id}: {got!r}")
        for key, offset in observation.acknowledged.offsets.items():
            kept = observation.offsets[key]
            if kept is None or kept < offset:
                problems.append(f"{observation.label}: offset {key} is {kept}, was {offset}")
    assert len(observed) >= 20
    assert problems == []
