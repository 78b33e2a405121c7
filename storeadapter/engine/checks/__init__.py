"""The checks behind ``verify``, one module per kind of file; each reads its files
read-only and returns what it found (``problems.Findings``; the event index's as plain
dicts). ``verify.verify_store`` runs them all."""

from .event_index import check_event_index

__all__ = ["check_event_index"]
