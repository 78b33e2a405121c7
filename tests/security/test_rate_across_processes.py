"""The API's rate per user counts in Redis (settings.CACHES on REDIS_URL), so requests
counted by one server process are seen by another: two processes with the console's own
settings against the test Redis database (issue 35). When Redis does not answer, the API
still answers: the throttle lets the request through."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: One process's requests as user 7, each through the API's throttle: whether it was let in.
REQUESTS = textwrap.dedent(
    """
    import sys

    import django

    django.setup()
    from django.test import RequestFactory

    from console.accounts.throttle import ApiRateThrottle


    class User:
        is_authenticated = True
        pk = 7


    request = RequestFactory().get("/api/v1/topics/")
    request.user = User()
    print(" ".join(str(ApiRateThrottle().allow_request(request, None))
                   for _ in range(int(sys.argv[1]))))
    """
)


def requests_in_a_process(count: int, redis_url: str, tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(DJANGO_SETTINGS_MODULE="console.settings", DEBUG="true")
    env.update(TIDEMARK_ENV_FILE=os.devnull, REDIS_URL=redis_url, TIDEMARK_API_RATE="3/min")
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    result = subprocess.run(
        [sys.executable, "-c", REQUESTS, str(count)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_requests_counted_by_one_process_are_seen_by_another(redis_db, settings, tmp_path):
    assert requests_in_a_process(3, settings.REDIS_URL, tmp_path) == ["True"] * 3

    assert requests_in_a_process(1, settings.REDIS_URL, tmp_path) == ["False"]
    assert any(key.startswith(b"tidemark") for key in redis_db.scan_iter())


def test_the_api_answers_when_redis_does_not(tmp_path):
    # A port nothing listens on: connections are refused at once.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    allowed = requests_in_a_process(4, f"redis://127.0.0.1:{port}/0", tmp_path)

    assert allowed == ["True"] * 4
