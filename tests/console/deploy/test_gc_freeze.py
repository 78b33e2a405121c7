"""The web process freezes what it holds after its first response out of the garbage
collector's full collections (console/core/middleware.py)."""

from __future__ import annotations

import gc

import pytest

from console.core.middleware import forget_freeze, freeze_startup_objects


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    forget_freeze()
    yield
    gc.unfreeze()


def test_the_first_response_freezes_what_is_alive(client, unfrozen):
    assert gc.get_freeze_count() == 0

    assert client.get("/healthz").status_code == 200

    assert gc.get_freeze_count() > 0


def test_nothing_is_frozen_when_the_setting_is_off(client, settings, unfrozen):
    settings.TIDEMARK_GC_FREEZE = False

    client.get("/healthz")

    assert gc.get_freeze_count() == 0


def test_a_process_freezes_once(unfrozen):
    assert freeze_startup_objects() is True
    assert freeze_startup_objects() is False
