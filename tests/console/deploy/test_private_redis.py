"""`make test` on a machine where no Redis answers: the session starts a private
redis-server (tests/conftest.py's private_redis) and the Celery tests use it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def test_a_suite_without_redis_starts_its_own(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens once the probe is closed
    env = {**os.environ, "TIDEMARK_TEST_REDIS_URL": f"redis://127.0.0.1:{closed}/15"}

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/console/pages/test_health.py::test_background_is_200_when_redis_and_a_worker_answer",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 passed" in result.stdout
