"""NATS JetStream with file storage, on the server already running on this machine.

A uniquely named stream (file storage, one replica, one subject) is created for each
body size and deleted afterwards. Append: ``publish_async`` of every message of a window
of ``batch``, then the window's acknowledgements gathered (each one says the server
stored the message; it is not synced: the server syncs its files every 2 minutes by
default, so a power loss may lose up to that, a wider window than Tidemark's async
mode). Read: a pull consumer (no acknowledgement needed, like a read by offset) fetching
``batch`` messages per request. The client is nats-py, run on a private event loop.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import nats
from nats.js import api

from peers.base import Peer

SERVER = os.environ.get("TIDEMARK_BENCH_NATS", "nats://127.0.0.1:4222")
START_HINT = (
    "start it with: start-stop-daemon --start --oknodo --background --exec "
    "/usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server "
    "-l /var/log/nats-server.log"
)
FETCH_TIMEOUT_S = 10.0


class JetStreamPeer(Peer):
    name = "jetstream"
    durability = "file storage, acknowledged when stored (synced every 2 min)"
    method = "publish_async, acks gathered per window of `batch`; pull fetch of `batch`"

    def __init__(self, server: str = SERVER) -> None:
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.nc: nats.NATS | None = None
        self.js = None
        self.stream = ""
        self.count = 0

    def _run(self, coroutine):
        # The client's loop runs in a thread of its own: the caller's thread may already
        # run a loop (a test process that drove a browser through Playwright does).
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def _start_loop(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="jetstream-client", daemon=True
        )
        self._thread.start()

    def _stop_loop(self) -> None:
        if self.loop is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
        self.loop = None

    def setup(self, workdir: Path, size: int) -> None:
        # nats-py retries a refused first connection for ever: ask the port first.
        address = urlsplit(self.server)
        try:
            socket.create_connection((address.hostname, address.port or 4222), timeout=2).close()
        except OSError as error:
            raise RuntimeError(
                f"NATS does not answer at {self.server} ({error}); {START_HINT}"
            ) from error
        self._start_loop()
        try:
            self.nc = self._run(
                asyncio.wait_for(
                    nats.connect(
                        self.server,
                        connect_timeout=2,
                        max_reconnect_attempts=0,
                        allow_reconnect=False,
                    ),
                    10,
                )
            )
        except Exception as error:
            self._stop_loop()
            raise RuntimeError(
                f"NATS does not answer at {self.server} ({error!r}); {START_HINT}"
            ) from error
        self.js = self.nc.jetstream(publish_async_max_pending=65_536)
        self.stream = f"tidemark_bench_{os.getpid()}_{size}_{secrets.token_hex(4)}"
        self._run(
            self.js.add_stream(
                api.StreamConfig(
                    name=self.stream,
                    subjects=[f"{self.stream}.m"],
                    storage=api.StorageType.FILE,
                    num_replicas=1,
                )
            )
        )

    def append(self, bodies: list[bytes], batch: int) -> None:
        self._run(self._append(bodies, batch))
        self.count += len(bodies)

    async def _append(self, bodies: list[bytes], batch: int) -> None:
        publish = self.js.publish_async
        subject = f"{self.stream}.m"
        for lo in range(0, len(bodies), batch):
            window = [await publish(subject, body) for body in bodies[lo : lo + batch]]
            for ack in await asyncio.gather(*window):
                if ack.stream != self.stream:
                    raise RuntimeError(f"acknowledged by stream {ack.stream}, not {self.stream}")

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL
        )
        subscription = self._run(
            self.js.pull_subscribe(
                f"{self.stream}.m",
                durable="reader",
                stream=self.stream,
                config=config,
                pending_msgs_limit=4 * batch,
            )
        )
        left = self.count
        while left > 0:
            messages = self._run(subscription.fetch(min(batch, left), timeout=FETCH_TIMEOUT_S))
            left -= len(messages)
            yield [message.data for message in messages]
        self._run(subscription.unsubscribe())

    def teardown(self) -> None:
        if self.loop is None:
            return
        try:
            if self.nc is not None and self.stream:
                self._run(self.js.delete_stream(self.stream))
        finally:
            try:
                if self.nc is not None:
                    self._run(self.nc.close())
            finally:
                self._stop_loop()
            self.nc = None
            self.count = 0
