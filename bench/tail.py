"""The live tail's latency: from an append to the message in a tail's answer, at a steady
rate of appends (issue 34, item 2; target: p99 ≤ 200 ms at 1,000 messages a second).

    .venv/bin/python bench/tail.py [--rate N] [--seconds S] [--warmup S] [--queues N]
                                   [--dir PATH]

The console runs as in production: ``tidemark serve`` (gunicorn, one worker of 4
threads, DEBUG off) on a fresh store and SQLite database in a temporary directory (or
``--dir``), with a viewer's API token. A producer process (not the server's, as a user's
producers are) appends single messages at ``--rate`` a second, round-robin over the
queues tailed, each body holding the wall-clock time just before its
``append``. This process tails the topic through ``GET /api/v1/topics/<topic>/tail/``
(long polls, ``wait`` 10 s, the rate cap at its most, 1,000 a second) and takes, for
each message in an answer, the time the answer arrived minus the time in its body.

Four runs: the tail of every queue (several queues: the server's waiting pulls take
turns of 10 ms), the tail of queue 0 alone (one pull waits the whole time), and the tail
of every queue again while the console's pages are requested (below), and the tail of
every queue paced as the console's tail page paces it (after an answer with messages,
the next poll starts 100 ms after the one before at the soonest). The first
``--warmup`` seconds of each are left out. Reported: p50, p90, p99 and max of the
latency, messages seen and dropped by the rate cap, polls, and the CPU seconds the
server process spent per second of tailing (its /proc utime + stime; the producer's and
this process's are not in it). In the third run a thread of this process requests the
console's pages (``PAGES``, a viewer's session) one after another, as fast as they are
answered (a load well above a few people's); their p95 is set beside the same pages'
before any tail (``--page-rounds`` rounds): the pages' latency with and without a tail,
and the tail's with the pages. Prints a table, then one JSON line. Timings only: no test
asserts them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import requests

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from storeadapter.engine import MessageStore, StoreConfig  # noqa: E402

TIDEMARK = Path(sys.executable).parent / "tidemark"
TOPIC = "ticks"
SEGMENT_BYTES = 16 << 20
WAIT_S = 10
TAIL_RATE = 1000
TARGET_P99_MS = 200.0
#: The console's tail page starts a poll at most this often while messages keep coming
#: (MIN_POLL_MS in static/js/tail.js).
PAGE_MIN_POLL_MS = 100

SETUP = """
from console.accounts.models import ApiToken
from console.accounts.roles import ensure_role_groups
from console.core.store import get_store
from django.contrib.auth import get_user_model
user = get_user_model().objects.create_user(username="tailer", password=None)
user.groups.add(ensure_role_groups()["viewer"])
get_store().create_topic("{topic}", queues={queues})
from django.test import Client
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value)
print(ApiToken.issue(user, "tail bench")[1])
"""


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DEBUG")}
    env.update(
        DEBUG="false",
        SECRET_KEY="tail-bench-" + "k" * 50,
        ALLOWED_HOSTS="127.0.0.1",
        TIDEMARK_ENV_FILE=os.devnull,
        SECURE_SSL_REDIRECT="false",
        SESSION_COOKIE_SECURE="false",
        CSRF_COOKIE_SECURE="false",
        DATABASE_URL=f"sqlite:///{home / 'db.sqlite3'}",
        TIDEMARK_STORE_DIR=str(home / "store"),
        TIDEMARK_SEGMENT_BYTES=str(SEGMENT_BYTES),
        TIDEMARK_STATIC_ROOT=str(home / "static"),
        # This checkout's code, whichever checkout the `tidemark` script came from.
        PYTHONPATH=str(PROJECT_ROOT),
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(TIDEMARK), "manage", *args], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise SystemExit(f"tidemark manage {args[0]} failed:\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(env: dict[str, str], home: Path) -> Iterator[tuple[str, int]]:
    """gunicorn on a free port: (base URL, its worker's pid) once /healthz answers."""
    port = free_port()
    log = (home / "gunicorn.log").open("w")
    process = subprocess.Popen(
        [str(TIDEMARK), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        + ["--threads", "4"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=home,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(base + "/healthz", timeout=10).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("gunicorn did not start:\n" + (home / "gunicorn.log").read_text())
            time.sleep(0.2)
        yield base, worker_pid(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def worker_pid(master: int) -> int:
    """gunicorn's worker (the master's child) serves the requests."""
    children = Path(f"/proc/{master}/task/{master}/children")
    for _ in range(50):
        found = children.read_text().split() if children.exists() else []
        if found:
            return int(found[0])
        time.sleep(0.1)
    return master


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(store_dir: str, queues: int, rate: int, seconds: float, started) -> None:
    """Append one message every 1/rate s for ``seconds`` (in its own process)."""
    store = MessageStore.open(store_dir, StoreConfig(segment_bytes=SEGMENT_BYTES))
    try:
        started.wait()
        interval = 1.0 / rate
        begin = time.perf_counter()
        n = 0
        while True:
            due = begin + n * interval
            now = time.perf_counter()
            if now - begin >= seconds:
                break
            if due > now:
                time.sleep(due - now)
            body = json.dumps({"n": n, "t_ns": time.time_ns()}).encode()
            store.append(TOPIC, body, queue=n % queues)
            n += 1
    finally:
        store.close()


#: The console's other pages, timed while nothing tails and while a tail runs.
PAGES = ("/", "/topics/", f"/topics/{TOPIC}/", "/groups/", "/storage/")


def time_pages(base: str, session_id: str, until: threading.Event, rounds: int) -> list[float]:
    """Milliseconds of each page request, every page in turn, for ``rounds`` rounds or
    until ``until`` is set."""
    session = requests.Session()
    session.cookies.set("sessionid", session_id)
    times: list[float] = []
    done = 0
    while done < rounds and not until.is_set():
        for page in PAGES:
            began = time.perf_counter()
            answer = session.get(base + page, timeout=60, allow_redirects=False)
            times.append((time.perf_counter() - began) * 1000)
            if answer.status_code != 200:
                raise SystemExit(f"{page} answered {answer.status_code}")
        done += 1
    return times


def quantile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)


def tail_run(
    base: str,
    key: str,
    store_dir: str,
    worker: int,
    args,
    queues: str | None,
    session_id: str | None,
    min_poll_ms: int = 0,
) -> dict[str, object]:
    """One run: the tail of ``queues`` (None: every queue), the producer appending to
    the queues tailed; with ``session_id``, the pages requested meanwhile; with
    ``min_poll_ms``, a poll after an answer with messages starts that long after the one
    before at the soonest (as the console's tail page does)."""
    produce_queues = args.queues if queues is None else 1
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    url = f"{base}/api/v1/topics/{TOPIC}/tail/"
    query: dict[str, object] = {"wait": WAIT_S, "rate": TAIL_RATE}
    if queues is not None:
        query["queues"] = queues
    first = session.get(url, params=query, timeout=30)
    first.raise_for_status()
    cursor = first.json()["cursor"]

    started = multiprocessing.get_context("spawn").Event()
    producer = multiprocessing.get_context("spawn").Process(
        target=produce, args=(store_dir, produce_queues, args.rate, args.seconds, started)
    )
    producer.start()
    time.sleep(1.0)  # the producer has opened the store
    latencies: list[float] = []
    seen = dropped = polls = 0
    cpu_before = cpu_seconds(worker)
    wall_before = time.perf_counter()
    warm_until_ns = time.time_ns() + int(args.warmup * 1e9)
    pages_until = threading.Event()
    page_times: list[float] = []
    pages = threading.Thread(
        target=lambda: page_times.extend(time_pages(base, session_id, pages_until, 10**9))
    )
    started.set()
    if session_id is not None:
        pages.start()
    deadline = time.monotonic() + args.seconds + 2
    poll_started = 0.0
    while time.monotonic() < deadline:
        poll_started = time.monotonic()
        answer = session.get(url, params={**query, "cursor": cursor}, timeout=WAIT_S + 30)
        arrived_ns = time.time_ns()
        answer.raise_for_status()
        data = answer.json()
        polls += 1
        cursor = data["cursor"]
        dropped += data["dropped"]
        for message in data["messages"]:
            sent_ns = json.loads(message["body"])["t_ns"]
            seen += 1
            if sent_ns >= warm_until_ns:
                latencies.append((arrived_ns - sent_ns) / 1e6)
        if not producer.is_alive() and not data["messages"]:
            break
        if min_poll_ms and data["messages"]:
            time.sleep(max(0.0, poll_started + min_poll_ms / 1000 - time.monotonic()))
    wall = time.perf_counter() - wall_before
    cpu = cpu_seconds(worker) - cpu_before
    pages_until.set()
    if session_id is not None:
        pages.join()
    producer.join(timeout=30)
    latencies.sort()

    def at(fraction: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(fraction * len(latencies)))], 2)

    return {
        "queues": (queues or f"all {args.queues}")
        + (" + pages" if session_id else "")
        + (", page pace" if min_poll_ms else ""),
        "messages_seen": seen,
        "dropped": dropped,
        "measured": len(latencies),
        "polls": polls,
        "p50_ms": at(0.50) if latencies else None,
        "p90_ms": at(0.90) if latencies else None,
        "p99_ms": at(0.99) if latencies else None,
        "max_ms": round(latencies[-1], 2) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 2) if latencies else None,
        "server_cpu_s_per_s": round(cpu / wall, 3),
        "pages_p50_ms": quantile(page_times, 0.50),
        "pages_p95_ms": quantile(page_times, 0.95),
        "pages_requests": len(page_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="appends a second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--queues", type=int, default=4, help="the topic's queues")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--page-rounds", type=int, default=40, help="rounds of the pages with no tail"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="tail-bench-") as tmp:
        home = Path(tmp)
        env = environment(home)
        manage(env, "migrate", "--noinput", "-v", "0")
        # The pages name their hashed static files: DEBUG off needs the manifest.
        manage(env, "collectstatic", "--noinput", "-v", "0")
        made = manage(env, "shell", "-c", SETUP.format(topic=TOPIC, queues=args.queues))
        session_id, key = made.strip().splitlines()[-2:]
        runs = []
        with serving(env, home) as (base, worker):
            idle = time_pages(base, session_id, threading.Event(), args.page_rounds)
            for queues, pages, pace in (
                (None, None, 0),
                ("0", None, 0),
                (None, session_id, 0),
                (None, None, PAGE_MIN_POLL_MS),
            ):
                runs.append(
                    tail_run(base, key, str(home / "store"), worker, args, queues, pages, pace)
                )

    columns = (
        ("tailing", "queues"),
        ("p50 ms", "p50_ms"),
        ("p90 ms", "p90_ms"),
        ("p99 ms", "p99_ms"),
        ("max ms", "max_ms"),
        ("seen", "messages_seen"),
        ("dropped", "dropped"),
        ("polls", "polls"),
        ("server CPU s/s", "server_cpu_s_per_s"),
        ("pages p95 ms", "pages_p95_ms"),
    )
    idle_figures = {
        "p50_ms": quantile(idle, 0.50),
        "p95_ms": quantile(idle, 0.95),
        "requests": len(idle),
    }
    print(
        f"Live tail at {args.rate} appends/s over {args.seconds:g} s "
        f"(first {args.warmup:g} s left out), target p99 <= {TARGET_P99_MS:g} ms"
    )
    print(" | ".join(f"{title:>14}" for title, _ in columns))
    for run in runs:
        shown = ("-" if run[name] is None else str(run[name]) for _, name in columns)
        print(" | ".join(f"{value:>14}" for value in shown))
    print(
        f"Pages {', '.join(PAGES)} with no tail: p50 {idle_figures['p50_ms']} ms, "
        f"p95 {idle_figures['p95_ms']} ms ({idle_figures['requests']} requests)"
    )
    print(
        json.dumps(
            {
                "bench": "tail",
                "rate": args.rate,
                "seconds": args.seconds,
                "target_p99_ms": TARGET_P99_MS,
                "runs": runs,
                "pages_no_tail": idle_figures,
            }
        )
    )


if __name__ == "__main__":
    main()
