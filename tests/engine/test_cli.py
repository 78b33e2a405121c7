"""The engine's command line, run as a user runs it: ``python -m storeadapter.engine``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Not run again in the shared-layout pass: the command line runs in its own process
# and never reads TIDEMARK_TEST_LAYOUT.
pytestmark = pytest.mark.one_layout

ROOT = Path(__file__).resolve().parents[2]


def run(store: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "storeadapter.engine", "--dir", str(store), *args],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def created(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store the command line created (8 KiB segments, topic orders of 2 queues), once."""
    path = tmp_path_factory.mktemp("cli") / "store"
    result = run(path, "--segment-bytes", "8192", "create-topic", "orders", "--queues", "2")
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def store(created: Path, tmp_path: Path) -> Path:
    """A copy of that store for one test (one process start fewer per test)."""
    path = tmp_path / "store"
    shutil.copytree(created, path)
    return path


def test_create_topic_reports_the_topic(tmp_path: Path) -> None:
    result = run(tmp_path / "s", "create-topic", "orders", "--queues", "3")

    assert result.returncode == 0
    assert b"created topic orders with 3 queues" in result.stdout


def test_produce_reads_stdin_lines_and_consume_prints_them(store: Path) -> None:
    assert run(store, "produce", "orders", "--queue", "1", stdin="alpha\nbeta\n").returncode == 0

    result = run(store, "consume", "orders", "--queue", "1")

    lines = result.stdout.decode().splitlines()
    assert [line.split("\t")[2] for line in lines] == ["alpha", "beta"]
    assert [line.split("\t")[0] for line in lines] == ["1:0", "1:1"]


def test_produce_count_generates_messages_of_the_given_size(store: Path) -> None:
    assert run(store, "produce", "orders", "--count", "300", "--size", "100").returncode == 0

    stats = json.loads(run(store, "stat", "--json").stdout)

    assert stats["topics"]["orders"]["messages"] == 300
    assert stats["segment_count"] > 1  # 8 KiB segments, kept from store creation


def test_produce_ids_then_get_returns_the_message(store: Path) -> None:
    produced = run(store, "produce", "orders", "--ids", "--key", "k1", stdin="payload\n")
    message_id = produced.stdout.split()[0].decode()

    result = run(store, "get", message_id)

    message = json.loads(result.stdout)
    assert message["body"] == "payload"
    assert message["keys"] == ["k1"]


def test_consume_with_group_and_commit_continues_where_it_stopped(store: Path) -> None:
    run(store, "produce", "orders", "--queue", "0", stdin="a\nb\nc\n")

    first = run(
        store, "consume", "orders", "--queue", "0", "--max", "2", "--group", "g", "--commit"
    )
    second = run(store, "consume", "orders", "--queue", "0", "--group", "g")

    assert [line.split(b"\t")[2] for line in first.stdout.splitlines()] == [b"a", b"b"]
    assert [line.split(b"\t")[2] for line in second.stdout.splitlines()] == [b"c"]


def test_verify_passes_on_an_intact_store(store: Path) -> None:
    run(store, "produce", "orders", "--count", "200", "--size", "64")

    result = run(store, "verify")

    assert result.returncode == 0
    assert b"200 records" in result.stdout


def test_verify_reports_a_corrupt_record_with_its_offset_and_exits_1(store: Path) -> None:
    run(store, "produce", "orders", "--count", "200", "--size", "64")
    first_segment = store / "commitlog" / ("0" * 20)
    data = bytearray(first_segment.read_bytes())
    data[200] ^= 0x01
    first_segment.write_bytes(bytes(data))

    result = run(store, "verify", "--json")

    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert report["ok"] is False
    assert report["corruptions"][0]["commit_offset"] <= 200
    assert report["records"] == 199


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("create-topic", "../escape"), b"topic name '../escape' is not valid"),
        (("get", "not-an-id"), b"is not a message id"),
        (("consume", "missing"), b"topic 'missing' does not exist"),
        (("produce", "orders", "--queue", "9"), b"there is no queue 9"),
        (("consume", "orders", "--commit"), b"--commit needs --group"),
    ],
)
def test_store_errors_exit_3_with_one_sentence_and_no_traceback(
    store: Path, args: tuple[str, ...], sentence: bytes
) -> None:
    result = run(store, *args, stdin="x\n")

    assert result.returncode == 3
    assert result.stderr.startswith(b"error: ")
    assert sentence in result.stderr
    assert b"Traceback" not in result.stderr
    assert not (store.parent / "escape").exists()


def test_bad_usage_exits_2(store: Path) -> None:
    result = run(store, "produce")

    assert result.returncode == 2
    assert b"Traceback" not in result.stderr


def test_verify_of_a_directory_without_a_store_exits_3(tmp_path: Path) -> None:
    result = run(tmp_path / "nothing", "verify")

    assert result.returncode == 3
    assert b"holds no commit log" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["stat"], ["consume", "orders"], ["verify"], ["topics"], ["get", "x"], ["delete-topic", "o"]],
)
def test_a_command_on_a_directory_without_a_store_exits_3_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()

    result = run(empty, *command)

    assert result.returncode == 3
    assert b"is not a Tidemark store" in result.stderr
    assert b"Traceback" not in result.stderr
    assert list(empty.iterdir()) == []
    assert not (tmp_path / "missing").exists()
