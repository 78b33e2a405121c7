"""Child process for test_crash_sigkill: appends forever until it is killed.

Usage: python crash_writer.py STORE_DIR MODE ACK_FILE SEED (the test forks
``write_until_killed`` from a fork server instead: the same code, no interpreter start)

After each append (or batch) returns, one line per message it acknowledged is written
to ACK_FILE and flushed: ``message_id queue queue_offset sha256(body)``. Bodies carry
their own checksum (see ``body_is_intact``), so any record read back can be checked.
"""

from __future__ import annotations

import hashlib
import random
import sys

from storeadapter.engine import STATUS_OK, Message, MessageStore, StoreConfig
from tests.engine.storetools import INDEX_ENTRIES, INDEX_SLOTS

SEGMENT_BYTES = 8192
DIGEST = 16


def writer_config(mode: str) -> StoreConfig:
    return StoreConfig(
        index_slots=INDEX_SLOTS,
        index_entries=INDEX_ENTRIES,
        segment_bytes=SEGMENT_BYTES,
        max_message_bytes=1024,
        queue_file_entries=64,
        flush_mode=mode,
        flush_interval_ms=20,
    )


def make_body(rng: random.Random, seed: int, number: int) -> bytes:
    rest = f"{seed}:{number}:".encode() + rng.randbytes(rng.randrange(0, 600))
    return hashlib.sha256(rest).hexdigest()[:DIGEST].encode() + rest


def body_is_intact(body: bytes) -> bool:
    return body[:DIGEST] == hashlib.sha256(body[DIGEST:]).hexdigest()[:DIGEST].encode()


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def main() -> None:
    write_until_killed(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))


def write_until_killed(path: str, mode: str, ack_path: str, seed: int) -> None:
    """Append and acknowledge until killed (also the target of a fork server's child)."""
    rng = random.Random(seed)
    store = MessageStore.open(path, writer_config(mode))
    number = 0
    with open(ack_path, "a") as acks:
        while True:
            if rng.random() < 0.2:
                messages = [
                    Message(make_body(rng, seed, number + i), key=f"k{rng.randrange(9)}")
                    for i in range(rng.randrange(2, 8))
                ]
                results = store.append_batch("t", messages)
                bodies = [m.body for m in messages]
            else:
                body = make_body(rng, seed, number)
                tag = rng.choice([None, "a", "b"])
                results = [store.append("t", body, tag=tag)]
                bodies = [body]
            number += len(bodies)
            for result, body in zip(results, bodies, strict=True):
                if result.status == STATUS_OK:
                    acks.write(
                        f"{result.message_id} {result.queue} {result.queue_offset} "
                        f"{body_hash(body)}\n"
                    )
            acks.flush()


if __name__ == "__main__":
    main()
