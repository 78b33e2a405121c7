"""The peers `make bench` measures give back what they were given, in order.

Behaviour only, never timings: each adapter in bench/peers/ appends a few hundred
messages of mixed sizes and binary content, reads them back in batches, and cleans up
after itself (files, private redis-server, JetStream stream).
"""

from __future__ import annotations

import asyncio
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    # Appended, not prepended: bench/console.py must not shadow the console package.
    sys.path.append(str(BENCH))

from peers import PEERS  # noqa: E402
from peers.jetstream import START_HINT, JetStreamPeer  # noqa: E402
from peers.redis_streams import RedisStreamsPeer  # noqa: E402

COUNT = 300
BATCH = 64
READ_BATCH = 50


def _bodies() -> list[bytes]:
    rng = random.Random(9)
    return [
        i.to_bytes(4, "big") + rng.randbytes(rng.choice((1, 50, 700, 1024, 4096)))
        for i in range(COUNT)
    ]


def _setup(peer, workdir: Path, size: int) -> None:
    try:
        peer.setup(workdir, size)
    except RuntimeError:
        if isinstance(peer, JetStreamPeer):
            pytest.fail(
                f"NATS JetStream is not answering at {peer.server}: {START_HINT}", pytrace=False
            )
        raise


@pytest.mark.parametrize("name", list(PEERS))
def test_round_trip_in_order(name: str, tmp_path: Path) -> None:
    bodies = _bodies()
    peer = PEERS[name]()
    _setup(peer, tmp_path, 1024)
    try:
        peer.prepare(bodies)
        peer.append(bodies, BATCH)
        peer.finish_append()
        batches = list(peer.batches(READ_BATCH))
    finally:
        peer.teardown()
    got = [body for batch in batches for body in batch]
    assert all(0 < len(batch) <= READ_BATCH for batch in batches)
    assert len(got) == COUNT
    assert got == peer.order(bodies, READ_BATCH)
    assert sorted(got) == sorted(bodies)
    assert not list(tmp_path.iterdir()), f"{name} left files behind"


@pytest.mark.parametrize("name", list(PEERS))
def test_read_all_counts_messages_and_bytes(name: str, tmp_path: Path) -> None:
    bodies = _bodies()[:120]
    peer = PEERS[name]()
    _setup(peer, tmp_path, 50)
    try:
        peer.prepare(bodies)
        peer.append(bodies, BATCH)
        peer.finish_append()
        assert peer.read_all(READ_BATCH) == (len(bodies), sum(map(len, bodies)))
    finally:
        peer.teardown()


def test_redis_server_is_private_and_stopped(tmp_path: Path) -> None:
    peer = RedisStreamsPeer(appendfsync="always")
    _setup(peer, tmp_path, 50)
    process = peer.process
    try:
        assert peer.client.config_get("appendfsync") == {"appendfsync": "always"}
        assert peer.client.config_get("save") == {"save": ""}
        assert peer.client.config_get("appendonly") == {"appendonly": "yes"}
    finally:
        peer.teardown()
    assert process.poll() is not None


def test_jetstream_stream_is_deleted(tmp_path: Path) -> None:
    import nats
    from nats.js.errors import NotFoundError

    peer = JetStreamPeer()
    _setup(peer, tmp_path, 50)
    stream = peer.stream
    peer.append([b"one", b"two"], BATCH)
    peer.teardown()

    async def gone() -> bool:
        nc = await nats.connect(peer.server)
        try:
            await nc.jetstream().stream_info(stream)
        except NotFoundError:
            return True
        finally:
            await nc.close()
        return False

    # In a thread of its own: a browser test before this one leaves Playwright's loop
    # running in this thread, where asyncio.run refuses to start another.
    with ThreadPoolExecutor(1) as thread:
        left_gone = thread.submit(asyncio.run, gone()).result()
    assert left_gone, f"stream {stream} was left on the server"
