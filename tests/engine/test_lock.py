"""One open store per directory: a second open, here or in another process, is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreLockedError

REPO = Path(__file__).resolve().parents[2]

_OPEN_IN_CHILD = """
import sys
from storeadapter.engine import MessageStore, StoreLockedError
try:
    MessageStore.open(sys.argv[1]).close()
except StoreLockedError as error:
    print("locked:", error)
    sys.exit(3)
print("opened")
"""


def _open_in_child(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _OPEN_IN_CHILD, str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_second_open_in_the_same_process_raises_store_locked(open_store, store_path, config):
    open_store()

    with pytest.raises(StoreLockedError, match=str(store_path)):
        MessageStore.open(store_path, config)


def test_first_store_keeps_working_after_a_refused_second_open(open_store, store_path, config):
    store = open_store()
    store.create_topic("t", queues=1)

    with pytest.raises(StoreLockedError):
        MessageStore.open(store_path, config)

    result = store.append("t", b"still mine")
    assert store.get(result.message_id).body == b"still mine"
    assert (store_path / "abort").exists()


def test_open_in_another_process_raises_store_locked(open_store, store_path):
    open_store()

    child = _open_in_child(store_path)

    assert child.returncode == 3, child.stderr
    assert child.stdout.startswith("locked:")


def test_store_can_be_opened_again_after_close(open_store, store_path):
    open_store().close()

    assert _open_in_child(store_path).stdout.strip() == "opened"
    open_store().close()
