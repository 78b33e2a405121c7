"""Redis Streams on a private ``redis-server`` started for the run and stopped after it.

The server gets a temporary directory, a free loopback port, no RDB snapshots
(``--save ""``) and the append-only file: ``appendfsync everysec`` (the AOF is synced
once a second, so a power loss may lose the last second, like Tidemark's async mode) or
``always`` (synced before a command's reply, like Tidemark's sync mode). Append: XADD
of one field per message, pipelined (no MULTI) in batches of ``batch``; read: XREAD
COUNT ``batch`` from the last id seen, over the loopback with redis-py.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from peers.base import Peer

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
STREAM = "bench"
FIELD = b"b"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisStreamsPeer(Peer):
    def __init__(self, appendfsync: str = "everysec") -> None:
        if appendfsync not in ("everysec", "always"):
            raise ValueError("appendfsync must be everysec or always")
        self.appendfsync = appendfsync
        self.name = f"redis_{appendfsync}"
        self.durability = f"AOF, appendfsync {appendfsync}"
        self.method = "XADD pipelined per `batch`; XREAD COUNT `batch`"
        self.process: subprocess.Popen | None = None
        self.directory: Path | None = None
        self.client: redis.Redis | None = None

    def setup(self, workdir: Path, size: int) -> None:
        if not Path(REDIS_SERVER).exists():
            raise RuntimeError(
                f"{REDIS_SERVER} is missing: install Debian's redis-server (make redis)"
            )
        self.directory = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=workdir))
        port = free_port()
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                self.appendfsync,
                "--daemonize",
                "no",
                "--logfile",
                str(self.directory / "redis.log"),
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.directory / "redis.log").read_text(errors="replace")[-500:]
                    self.teardown()
                    raise RuntimeError(f"redis-server did not start: {log}") from None
                time.sleep(0.02)
        got = self.client.config_get("appendfsync")["appendfsync"]
        if got != self.appendfsync:
            raise RuntimeError(f"redis-server runs with appendfsync {got}")

    def append(self, bodies: list[bytes], batch: int) -> None:
        assert self.client is not None
        pipe = self.client.pipeline(transaction=False)
        for lo in range(0, len(bodies), batch):
            for body in bodies[lo : lo + batch]:
                pipe.xadd(STREAM, {FIELD: body})
            pipe.execute()

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        assert self.client is not None
        last = b"0-0"
        xread = self.client.xread
        while True:
            answer = xread({STREAM: last}, count=batch)
            if not answer:
                return
            entries = answer[0][1]
            last = entries[-1][0]
            yield [fields[FIELD] for _, fields in entries]

    def teardown(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.process is not None:
            # SIGTERM: redis-server shuts down cleanly (a SHUTDOWN command through redis-py
            # would be retried by the client after the server hangs up).
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
