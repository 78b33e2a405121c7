"""A producer run as its own process by the multi-process tests.

    python producer_process.py STORE NAME COUNT ACKS [MODE]

Appends COUNT messages ``NAME-<i>`` to topic ``t`` (in batches of 1 to 7, so batches
of different processes interleave) and writes each acknowledged message id to ACKS,
one per line, only after ``append_batch`` returned.
"""

from __future__ import annotations

import random
import sys

from storeadapter.engine import MessageStore
from tests.engine.storetools import (
    small_config,
)


def main() -> None:
    path, name, count, acks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    mode = sys.argv[5] if len(sys.argv) > 5 else "async"
    config = small_config(
        flush_mode=mode,
    )
    rng = random.Random(name)
    with MessageStore.open(path, config) as store, open(acks, "w") as out:
        sent = 0
        while sent < count:
            size = min(count - sent, rng.randint(1, 7))
            bodies = [f"{name}-{sent + i}".encode() for i in range(size)]
            for result in store.append_batch("t", bodies):
                out.write(f"{result.message_id}\n")
            out.flush()
            sent += size


if __name__ == "__main__":
    main()
