"""The seam generation: one counter that moves whenever a function of the write path is
replaced or put back (docs/PERFORMANCE.md, "Issue 31 (part 4)").

The native append (nativeappend.py) stands in for a list of the long way's functions
and methods, and declines while any of them is not the genuine one, so that a fault
plan (a failing disk in ``fileio``, a kill point on an engine method, a test's
``monkeypatch``) sees every write. Looking them all up on every append cost more than
the rest of its checks; instead the modules and classes that hold them are *watched*:
assigning or deleting an attribute of one moves the native seam generation
(``_native.seam_changed``), and the core looks its list up again only when the
generation moved. Installing a plan needs nothing more than the assignment it already
makes.
"""

from __future__ import annotations

import sys
import types
from abc import ABCMeta


def changed() -> None:
    """Move the seam generation (a plan was installed or removed)."""
    from . import dataplane  # the one door to _native; imported late (fileio is below it)

    dataplane.seam_changed()


class WatchedModule(types.ModuleType):
    """A module whose attribute assignments move the seam generation."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        changed()

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        changed()


class Watched(type):
    """The metaclass of a class of the write path: assigning or deleting one of its
    attributes moves the seam generation."""

    def __setattr__(cls, name: str, value: object) -> None:
        super().__setattr__(name, value)
        changed()

    def __delattr__(cls, name: str) -> None:
        super().__delattr__(name)
        changed()


class WatchedABC(Watched, ABCMeta):
    """``Watched`` for a class with an abstract base (``ConsumeQueue``)."""


def watch_module(name: str) -> None:
    """Watch the module ``name`` (called at the end of its own body)."""
    sys.modules[name].__class__ = WatchedModule


__all__ = ["Watched", "WatchedABC", "WatchedModule", "changed", "watch_module"]
