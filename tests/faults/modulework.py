"""Work a test module does once and shares among its tests (a power-loss run, a template
store): its files under pytest's temporary directory, and its cached results let go when
the module's tests are over (with ``--dist loadfile`` a module runs whole on one worker)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


class ModuleWork:
    """The directory and the caches of one test module's shared work."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._root: Path | None = None
        self._caches: list[Any] = []
        self._made = 0

    def cached(self, function: Callable) -> Callable:
        """``functools.cache``, cleared when the module's tests end."""
        wrapped = functools.cache(function)
        self._caches.append(wrapped)
        return wrapped

    def directory(self, label: str) -> Path:
        """A new directory for one piece of work (only while the module's tests run)."""
        if self._root is None:
            raise RuntimeError(f"{self.name}: no test of the module is running")
        self._made += 1
        path = self._root / f"{self._made}-{label}"
        path.mkdir()
        return path

    def fixture(self) -> Callable:
        """The module's autouse fixture: assign it to a name in the test module."""

        @pytest.fixture(scope="module", autouse=True)
        def module_work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
            self._root = tmp_path_factory.mktemp(self.name)
            try:
                yield
            finally:
                for cache in self._caches:
                    cache.cache_clear()
                self._root = None

        return module_work
