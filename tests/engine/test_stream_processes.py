"""Several processes appending to one stream at once: the write lock and the catch-up
make every version and every command id go to exactly one of them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import small_config

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("stream_writer_process.py")
TOPIC = "accounts"
WRITERS = 4


def _run_writers(store_path: Path, tmp_path: Path, mode: str, *args: str) -> list[list[str]]:
    children = []
    outputs = []
    for number in range(WRITERS):
        out = tmp_path / f"wins-{number}.txt"
        outputs.append(out)
        children.append(
            subprocess.Popen(
                [sys.executable, str(WRITER), str(store_path), f"w{number}", mode, *args[:1],
                 str(out), *args[1:]],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stderr=subprocess.PIPE,
            )
        )  # fmt: skip
    while not all(Path(f"{out}.ready").exists() for out in outputs):
        assert all(child.poll() is None for child in children), "a writer died"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for child in children:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr.decode()
    return [out.read_text().split("\n")[:-1] for out in outputs]


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_exactly_one_writer_wins_each_version(store_path, tmp_path, mode):
    with MessageStore.open(store_path, small_config()) as store:
        store.create_stream_topic(TOPIC, queues=2)
    target = 100

    wins = _run_writers(store_path, tmp_path, mode, str(target))

    won = sorted((int(v), c) for lines in wins for v, c in (line.split() for line in lines))
    assert [v for v, _ in won] == list(range(1, target + 1))
    assert sum(1 for lines in wins if lines) >= 2, "the writers did not compete"
    with MessageStore.open(store_path, small_config()) as store:
        events = store.read_stream(TOPIC, "race", max_count=1000)
        assert [(e.version, e.command_id) for e in events] == won


def test_a_command_id_is_stored_once_whichever_process_sends_it(store_path, tmp_path):
    with MessageStore.open(store_path, small_config()) as store:
        store.create_stream_topic(TOPIC, queues=2)
    commands = 30

    wins = _run_writers(store_path, tmp_path, "async", "0", str(commands))

    stored = sorted(c for lines in wins for _, c in (line.split() for line in lines))
    assert stored == sorted(f"cmd-{n}" for n in range(commands))
    with MessageStore.open(store_path, small_config()) as store:
        events = store.read_stream(TOPIC, "race", max_count=1000)
        assert [e.version for e in events] == list(range(1, commands + 1))
        assert sorted(e.command_id for e in events) == stored
