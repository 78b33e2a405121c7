"""Read-only checks of store files beyond the commit log, for ``verify``: each takes a
store directory and returns the problems it found as plain dicts (never modifies a file)."""

from .event_index import check_event_index

__all__ = ["check_event_index"]
