"""Message ids: the store's id and the record's commit-log offset, in 24 hex digits.

``0000ABCD`` (store id, 8 digits) + ``0000000000001F40`` (offset, 16 digits). An id
is enough to read the message with one lookup: no index is consulted.
"""

from __future__ import annotations

from .errors import InvalidMessageIdError

MESSAGE_ID_LENGTH = 24
_HEX = frozenset("0123456789abcdefABCDEF")


def format_message_id(store_id: int, commit_offset: int) -> str:
    return f"{store_id:08X}{commit_offset:016X}"


def parse_message_id(message_id: object) -> tuple[int, int]:
    """Return (store id, commit-log offset), or raise InvalidMessageIdError."""
    if not isinstance(message_id, str):
        raise InvalidMessageIdError(
            f"a message id is a string of {MESSAGE_ID_LENGTH} hex digits, "
            f"not {type(message_id).__name__}"
        )
    if len(message_id) != MESSAGE_ID_LENGTH or not set(message_id) <= _HEX:
        shown = message_id if len(message_id) <= 40 else message_id[:40] + "…"
        raise InvalidMessageIdError(
            f"{shown!r} is not a message id: expected {MESSAGE_ID_LENGTH} hex digits "
            "(8 for the store, 16 for the commit-log offset)"
        )
    return int(message_id[:8], 16), int(message_id[8:], 16)
