"""How many long polls (pulls with ``wait`` > 0) may wait at once: per token and per process.

A waiting pull holds a server thread. Without a cap, one token's polls can hold every
thread and nothing else (health checks included) is answered. A poll over either cap is
refused at once with 429 and ``Retry-After``; a pull without ``wait`` is never refused here.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from rest_framework import exceptions


class TooManyLongPolls(exceptions.Throttled):
    """429 with Retry-After (DRF's Throttled, answered in the API's one error shape)."""

    default_code = "throttled"


_lock = threading.Lock()
_waiting: Counter[str] = Counter()


def waiting() -> int:
    """Long polls waiting in this process now."""
    with _lock:
        return sum(_waiting.values())


@contextmanager
def long_poll_slot(holder: str, wait_s: float) -> Iterator[None]:
    """Hold one of this process's long-poll slots for `holder` (a token or a user) while
    the block runs; TooManyLongPolls when `holder` or the process has none free."""
    retry_after = max(1, math.ceil(wait_s))
    per_process = settings.TIDEMARK_LONG_POLLS
    per_holder = settings.TIDEMARK_LONG_POLLS_PER_TOKEN
    with _lock:
        if _waiting[holder] >= per_holder:
            raise TooManyLongPolls(
                retry_after,
                f"This token has {per_holder} long polls waiting already, the most one token "
                "may have: pull without wait, or wait for one to end.",
            )
        if sum(_waiting.values()) >= per_process:
            raise TooManyLongPolls(
                retry_after,
                f"The server has {per_process} long polls waiting already, the most it "
                "serves at once: pull without wait, or try again later.",
            )
        _waiting[holder] += 1
    try:
        yield
    finally:
        with _lock:
            _waiting[holder] -= 1
            if _waiting[holder] <= 0:
                del _waiting[holder]
