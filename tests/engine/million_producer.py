"""Child process for test_million_queues: appends to a shared topic of QUEUES queues in
random queue order until it is killed.

Usage: python million_producer.py STORE_DIR ACK_FILE QUEUES

After each batch of 500 returns, one line ``{"batches": n}`` is written to ACK_FILE and
flushed. Message k of queue q has bench/million.py's ``body_of(q, k)``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from storeadapter.engine import MessageStore

BENCH = Path(__file__).resolve().parents[2] / "bench" / "million.py"
MESSAGES = 2_000_000
SEED = 5


def load_bench():
    spec = importlib.util.spec_from_file_location("million_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    path, acks, queues = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    million = load_bench()
    store = MessageStore.open(path, million.config())
    store.create_topic(million.TOPIC, queues=queues, layout="shared")
    plan = million.plan_queues(queues, MESSAGES, 1, seed=SEED)[0]
    sent: dict[int, int] = {}
    with open(acks, "w") as out:
        for start in range(0, len(plan), 500):
            batch = []
            for queue in plan[start : start + 500]:
                offset = sent.get(queue, 0)
                sent[queue] = offset + 1
                batch.append({"body": million.body_of(queue, offset), "queue": queue})
            store.append_batch(million.TOPIC, batch)
            out.write(json.dumps({"batches": start // 500 + 1}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
