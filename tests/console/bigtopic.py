"""A big topic for console tests: TIDEMARK_BIG_TOPIC_QUEUES lowered to 1,000, and a
shared topic "wide" of 20,000 queues, one message in every 50th queue, with group
"billing" committed on 20 of them."""

from __future__ import annotations

from console.monitoring import current
from storeadapter.engine import MessageStore

QUEUES = 20_000


def make_wide(settings, store: MessageStore) -> MessageStore:
    settings.TIDEMARK_BIG_TOPIC_QUEUES = 1_000
    settings.TIDEMARK_SAMPLE_CHUNK_QUEUES = 5_000
    settings.TIDEMARK_SAMPLE_QUEUE_BUDGET = QUEUES
    current._cache.update(token=None, groups=None)
    store.create_topic("wide", queues=QUEUES, layout="shared")
    store.append_batch("wide", [{"body": f"m{q}", "queue": q} for q in range(0, QUEUES, 50)])
    store.commit_offsets("billing", "wide", {q: 1 for q in range(0, 1_000, 50)})
    return store
