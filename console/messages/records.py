"""One message as JSON: the record every JSON view of a message answers with (the API's
messages, dead letters and search results, and the JSON Lines export alike)."""

from __future__ import annotations

import base64
import json
from typing import Any

from console.messages.bodies import store_time
from storeadapter.engine import StoredMessage

#: ``body_encoding``: the body as UTF-8 text when it decodes, else base64.
BODY_ENCODINGS = ("text", "base64")


def json_body(body: bytes) -> tuple[str, str]:
    """A body for JSON and its ``body_encoding``: UTF-8 text when it decodes, else base64."""
    try:
        return body.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def message_record(message: StoredMessage) -> dict[str, Any]:
    """Every field of the message; the store time also as ISO 8601 in UTC."""
    body, encoding = json_body(message.body)
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "queue": message.queue,
        "queue_offset": message.queue_offset,
        "commit_offset": message.commit_offset,
        "born_time_ms": message.born_time_ms,
        "store_time_ms": message.store_time_ms,
        "store_time": store_time(message.store_time_ms).isoformat(timespec="milliseconds"),
        "tag": message.tag,
        "keys": list(message.keys),
        "properties": dict(message.properties),
        "body_encoding": encoding,
        "body": body,
        "body_bytes": len(message.body),
    }


def export_line(message: StoredMessage) -> bytes:
    """The message's record as one line of JSON Lines, newline included."""
    return (json.dumps(message_record(message), ensure_ascii=False) + "\n").encode("utf-8")
