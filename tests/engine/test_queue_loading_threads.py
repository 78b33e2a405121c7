"""A queue loaded by one thread while another thread of the same process asks for it.

A queue's ends are found lazily, the first time it is used: its files are listed, the
end of the last one is looked for, and the store checks the ends against the log
(``on_load``). That takes file calls, each of which lets another thread run; the flush
thread loads queues too (following other processes, marking what it must fsync). A
thread that asks for the queue meanwhile must get its real ends, never the empty
queue (0, 0) it starts from: a reader would find every message of the queue gone, and
a check beside a long-lived member reported them lost (tests/faults/test_crash_loop.py,
``test_sigkill_loop_beside_a_long_lived_member_loses_nothing``).
"""

from __future__ import annotations

import threading

from storeadapter.engine import Message
from storeadapter.engine.consumequeue import ConsumeQueue
from tests.engine.storetools import small_config

MESSAGES = 40
#: How long the loading thread lets the other one run before it goes on (a bound on the
#: wait, not a timing checked: the answers are compared once both threads are done).
OTHER_THREAD_S = 3.0


def test_a_queue_asked_for_while_another_thread_loads_it_shows_its_messages(
    open_store, monkeypatch
):
    # A queue with files of its own whatever the run's layout: the thread is let run
    # from inside its files' listing (a shared topic's queues share ``QueueBase``'s
    # loading, and are loaded from their blocks instead).
    config = small_config(shared_layout_above=1024)
    with open_store(cfg=config) as store:
        store.create_topic("t", queues=1)
        store.append_batch("t", [Message(f"m{n}".encode()) for n in range(MESSAGES)])
    store = open_store(cfg=config)  # its queue is loaded when first used

    listed = ConsumeQueue._list_files
    asked: list[tuple[int, int]] = []
    other = threading.Thread(target=lambda: asked.append(store.queue_range("t", 0)))

    def list_files_letting_another_thread_run(queue: ConsumeQueue) -> None:
        if queue.owner == (b"t", 0) and other.ident is None:
            other.start()  # it asks for the queue while this thread loads it
            other.join(OTHER_THREAD_S)
        listed(queue)

    monkeypatch.setattr(ConsumeQueue, "_list_files", list_files_letting_another_thread_run)
    loaded = store.queue_range("t", 0)
    other.join()

    assert other.ident is not None  # the queue was loaded here, not by the flush thread
    assert loaded == (0, MESSAGES)
    assert asked == [(0, MESSAGES)]
    assert len(store.read("t", 0, 0, MESSAGES)) == MESSAGES
