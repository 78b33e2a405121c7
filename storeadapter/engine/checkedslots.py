"""Hash slots that carry their own check, as the key index and the event index keep them.

A slot is 8 bytes: the number of the newest entry it leads to, then the CRC32C of the
slot's byte position in its file and that number; an empty slot is 8 zero bytes. A slot
copied to another position, or with any bit flipped, fails its check.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

SLOT = struct.Struct("<II")
SLOT_SIZE = SLOT.size
_SLOT_CHECKED = struct.Struct("<QI")


def slot_bytes(position: int, number: int) -> bytes:
    """The slot at byte ``position`` of the file holding entry ``number`` (0: empty)."""
    if not number:
        return bytes(SLOT_SIZE)
    return SLOT.pack(number, crc32c(_SLOT_CHECKED.pack(position, number)))


def slot_valid(position: int, number: int, check: int) -> bool:
    """Whether a slot read as (``number``, ``check``) at byte ``position`` is intact."""
    if not number:
        return not check
    return check == crc32c(_SLOT_CHECKED.pack(position, number))
