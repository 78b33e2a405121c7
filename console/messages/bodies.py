"""How message bodies are shown: previews, text, pretty JSON, hex dumps, JSON Lines export.

Bodies are bytes. A body is shown as text when it is valid UTF-8 without control
characters (other than tab, newline, carriage return and form feed); otherwise it is
"binary". Views show at most ``DISPLAY_LIMIT`` bytes of a body and link to the full one.
"""

from __future__ import annotations

import codecs
import json
import re
from datetime import UTC, datetime
from typing import NamedTuple

#: Bytes of a body shown on a page; the rest is behind a download link.
DISPLAY_LIMIT = 64 * 1024
#: Characters of text in a body preview.
PREVIEW_CHARS = 80
#: Bytes of a body decoded for a preview: enough for PREVIEW_CHARS of any UTF-8 text.
_PREVIEW_BYTES = PREVIEW_CHARS * 4 + 4

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_WHITESPACE = re.compile(r"\s+")


def _decode_prefix(data: bytes) -> str | None:
    """`data` decoded as UTF-8, allowing it to end in the middle of a character; else None."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return None


def _is_text(text: str | None) -> bool:
    return text is not None and not _CONTROL.search(text)


def is_text(body: bytes) -> bool:
    """Whether the whole body is UTF-8 text without unprintable control characters."""
    try:
        return _is_text(body.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def preview(body: bytes) -> str:
    """One line for a results table: the first 80 characters, or "binary, N bytes"."""
    if not body:
        return "empty"
    text = _decode_prefix(body[:_PREVIEW_BYTES])
    if not _is_text(text):
        return f"binary, {len(body):,} bytes"
    text = _WHITESPACE.sub(" ", text).strip()
    if len(text) > PREVIEW_CHARS or len(body) > _PREVIEW_BYTES:
        return text[:PREVIEW_CHARS].rstrip() + "…"
    return text


class Shown(NamedTuple):
    """A body as one view shows it."""

    content: str
    #: Whether `content` shows only the first DISPLAY_LIMIT bytes (or characters).
    cut: bool
    #: A sentence about how the body was shown ("" when there is nothing to say).
    note: str = ""


def as_text(body: bytes) -> Shown:
    """The body as text: its first 64 KiB, invalid UTF-8 bytes shown as �."""
    cut = len(body) > DISPLAY_LIMIT
    shown = body[:DISPLAY_LIMIT]
    text = _decode_prefix(shown) if cut else None
    if text is None:
        text = shown.decode("utf-8", errors="replace")
    note = "" if is_text(body) else "The body is not UTF-8 text; unreadable bytes are shown as �."
    return Shown(text, cut, note)


def as_json(body: bytes) -> Shown | None:
    """The body pretty-printed as JSON (cut at 64 KiB of output), or None if it is not JSON."""
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    try:
        pretty.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from "\ud800" escapes: keep them escaped
        pretty = json.dumps(value, indent=2)
    cut = len(pretty) > DISPLAY_LIMIT
    return Shown(pretty[:DISPLAY_LIMIT], cut)


def json_error(body: bytes) -> str:
    """Why the body is not JSON, in one sentence."""
    try:
        json.loads(body)
    except UnicodeDecodeError:
        return "The body is not JSON: it is not UTF-8 text."
    except RecursionError:
        return "The body is not JSON that can be shown: it is nested too deeply."
    except ValueError as error:
        return f"The body is not JSON: {error}."
    return ""


def as_hex(body: bytes) -> Shown:
    """A hex dump of the first 64 KiB: offset, 16 bytes in hex, the same bytes as ASCII."""
    shown = body[:DISPLAY_LIMIT]
    lines = []
    for start in range(0, len(shown), 16):
        chunk = shown[start : start + 16]
        hex_part = " ".join(f"{byte:02x}" for byte in chunk[:8])
        if len(chunk) > 8:
            hex_part += "  " + " ".join(f"{byte:02x}" for byte in chunk[8:])
        ascii_part = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in chunk)
        lines.append(f"{start:08x}  {hex_part:<48}  |{ascii_part}|")
    return Shown("\n".join(lines), len(body) > DISPLAY_LIMIT)


def best_view(body: bytes) -> str:
    """The view a body opens in: "json" for a JSON object or array, "text", else "hex"."""
    if body[:1] in (b"{", b"[") and len(body) <= 4 * DISPLAY_LIMIT:
        shown = as_json(body)
        if shown is not None:
            return "json"
    return "text" if is_text(body[:DISPLAY_LIMIT]) else "hex"


def store_time(ms: int) -> datetime:
    """A store or born time in milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def readable_time(ms: int) -> str:
    """ "2024-05-01 12:34:56.789": a time in milliseconds, in UTC."""
    when = store_time(ms)
    return f"{when:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}"
