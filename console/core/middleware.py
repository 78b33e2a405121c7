"""Keep the objects a console process makes at start-up out of the garbage collector's
full collections.

A console process holds the open store (an object per queue used), Django's URL
resolvers, templates and settings for as long as it runs. Python's full collection
walks every tracked object: at 10,000 queues that walk cost 120–175 ms, paid by
whichever request met it (bench/console.py: p95 of two pages over 150 ms, p50 15–20
ms). Once the first response is out, everything alive then is frozen (``gc.freeze``):
later collections skip it, and reference counting still frees it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

_lock = threading.Lock()
_frozen = False


def freeze_startup_objects() -> bool:
    """Freeze what is alive now, once per process; whether this call did it."""
    global _frozen
    with _lock:
        if _frozen:
            return False
        _frozen = True
    gc.collect()
    gc.freeze()
    return True


def forget_freeze() -> None:
    """Let the next response freeze again (tests)."""
    global _frozen
    with _lock:
        _frozen = False


class FreezeStartupObjectsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _frozen and getattr(settings, "TIDEMARK_GC_FREEZE", True):
            freeze_startup_objects()
        return response
