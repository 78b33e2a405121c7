"""Oversized headers against a real server (`manage.py runserver`, what `make run` starts):
the test client hands headers straight to Django, so their limits need real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Left out of the server's environment, so it runs with the defaults.
CLEARED = {"DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "SECURE_SSL_REDIRECT"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[int]:
    """A console on a free local port with `make run`'s defaults (DEBUG on, plain HTTP),
    its own database and store."""
    port = free_port()
    home = tmp_path_factory.mktemp("server")
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["DEBUG"] = "true"  # as scripts/run.sh sets it
    env["DATABASE_URL"] = f"sqlite:///{home / 'db.sqlite3'}"
    env["TIDEMARK_STORE_DIR"] = str(home / "store")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while status_of(port, get_request()) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("manage.py runserver did not start within 30 s")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def get_request(*headers: str, path: str = "/healthz") -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *headers, "", ""]
    return "\r\n".join(lines).encode()


def status_of(port: int, request: bytes) -> int | None:
    """The status the server answers `request` with, or None if it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(request)
            head = connection.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def test_a_normal_request_answers_200(server):
    assert status_of(server, get_request()) == 200


def test_make_run_serves_the_login_page_over_plain_http(server):
    assert status_of(server, get_request(path="/accounts/login/")) == 200


def test_a_100_kb_header_line_is_431(server):
    assert status_of(server, get_request("X-Big: " + "a" * 100_000)) == 431


def test_a_thousand_headers_are_431(server):
    assert status_of(server, get_request(*(f"X-H{i}: v" for i in range(1000)))) == 431


def test_a_100_kb_request_line_is_414(server):
    request = f"GET /healthz?{'a' * 100_000} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()

    assert status_of(server, request) == 414


def test_the_server_still_answers_after_the_oversized_requests(server):
    for request in (get_request("X-Big: " + "a" * 100_000), get_request()):
        status_of(server, request)

    assert status_of(server, get_request()) == 200
