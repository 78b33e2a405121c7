"""Tag hashes stored in consume-queue entries, so a tag filter skips without reading."""

from __future__ import annotations

import hashlib
from functools import lru_cache


@lru_cache(maxsize=4096)
def tag_hash(tag: bytes) -> int:
    """64-bit hash of an encoded tag; 0 means "no tag"."""
    if not tag:
        return 0
    return int.from_bytes(hashlib.blake2b(tag, digest_size=8).digest(), "little") or 1
