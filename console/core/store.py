"""The console's door to the store: every view and task gets it here.

Views never open store files: they call ``get_store()`` and the ``storeadapter``
functions, which return plain results.
"""

from __future__ import annotations

from django.conf import settings

from storeadapter.access import store_at
from storeadapter.engine import MessageStore, StoreConfig


def store_config() -> StoreConfig:
    """The engine settings the console opens the store with (see .env.example).

    ``settings.TIDEMARK_STORE_OPTIONS`` (a dict of StoreConfig fields) overrides any of
    them: tests use it for small segments and index files.
    """
    options = {"flush_mode": getattr(settings, "TIDEMARK_FLUSH_MODE", "async")}
    options.update(getattr(settings, "TIDEMARK_STORE_OPTIONS", {}))
    return StoreConfig(**options)


def get_store() -> MessageStore:
    """This process's open store at ``settings.TIDEMARK_STORE_DIR``; within a read-only
    request of a user who reads some topic masked, a view of it that masks the messages
    it returns (console/accounts/masking.py)."""
    from console.accounts.masking import store_for_request

    return store_for_request(store_at(settings.TIDEMARK_STORE_DIR, store_config()))
