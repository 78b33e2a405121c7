"""A writer of one stream, run as its own process by the multi-process stream tests.

    python stream_writer_process.py STORE NAME MODE TARGET OUT [COMMANDS]

Each writer opens the store, creates ``OUT.ready`` and waits for the file ``go`` beside
OUT, so that they all start together.

Without COMMANDS: until the stream ``race`` of topic ``accounts`` reaches version
TARGET, reads its version and appends one event expecting it; each win is written to
OUT as ``<version> <command id>``, and the writer pauses a millisecond. With COMMANDS
(a count): appends one event per command id ``cmd-0`` .. ``cmd-<COMMANDS - 1>`` with no
expected version, and writes ``<version> <command id>`` for each it stored (the others
are duplicates).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from storeadapter.engine import DuplicateCommandError, MessageStore, WrongExpectedVersionError
from tests.engine.storetools import small_config

TOPIC = "accounts"
STREAM = "race"


def main() -> None:
    path, name, mode, target, out = sys.argv[1:6]
    commands = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    with MessageStore.open(path, small_config(flush_mode=mode)) as store, open(out, "w") as wins:
        Path(f"{out}.ready").touch()
        go = Path(out).with_name("go")
        while not go.exists():
            time.sleep(0.001)
        if commands:
            for number in range(commands):
                command = f"cmd-{number}"
                try:
                    result = store.append_event(TOPIC, STREAM, name.encode(), command_id=command)
                except DuplicateCommandError:
                    continue
                wins.write(f"{result.version} {command}\n")
            return
        attempt = 0
        while True:
            version = store.stream_version(TOPIC, STREAM)
            if version >= int(target):
                return
            attempt += 1
            command = f"{name}-{attempt}"
            try:
                result = store.append_event(
                    TOPIC, STREAM, name.encode(), expected_version=version, command_id=command
                )
            except WrongExpectedVersionError:
                continue
            wins.write(f"{result.version} {command}\n")
            wins.flush()
            time.sleep(0.001)  # let the others in: they must compete for the versions


if __name__ == "__main__":
    main()
