"""Data masking (issue 32, item 10): what a user who may view a topic but not read it sees
of its messages.

Mask rules (``MaskRule``) name topics by pattern and a part of their messages: a JSON
body's field (dotted for a nested one, ``*`` for the whole body), a property (``*``: all)
or the keys; each is masked (its value shown as ``MASK``) or removed. Such a user may open
the messages of a topic some mask rule covers, and sees them with every matching rule
applied; without a matching rule they may not read the topic at all
(``Permissions.allows``). A user who may read the topic sees it whole.

Masking happens in one place: on a read-only request (GET, HEAD) of a user who reads
some topic masked, ``console.core.store.get_store`` hands out a ``MaskingStore``, whose
read methods (``read``, ``read_result``, ``get``, ``query_by_key``, ``pull``,
``read_stream``) mask each message as they return it. So pages, the API, exports and
pulls alike show masked data. A change (POST: a redrive, a produce) gets the store itself.
"""

from __future__ import annotations

import contextvars
import json
from typing import Any

from django.core.exceptions import PermissionDenied

MASK = "****"
_MASK_BYTES = MASK.encode()

#: The request being answered (set by ``PermissionMiddleware``), for ``get_store``.
current_request: contextvars.ContextVar = contextvars.ContextVar("tidemark_request", default=None)


def _mask_json(value: Any, path: list[str], remove: bool) -> bool:
    """Mask or remove the field at ``path`` in ``value`` (in place); whether it was there."""
    if not isinstance(value, dict) or not path:
        return False
    head, rest = path[0], path[1:]
    if head not in value:
        return False
    if rest:
        return _mask_json(value[head], rest, remove)
    if remove:
        del value[head]
    else:
        value[head] = MASK
    return True


def mask_body(body: bytes, rules: list) -> bytes:
    """``body`` with the body rules applied: a whole-body rule replaces (or empties) it; a
    field rule masks a field of a JSON object body (a body that is no JSON object is
    masked whole, since the field cannot be found in it)."""
    fields = [r for r in rules if r.part == "body"]
    if not fields:
        return body
    if any(r.field == "*" for r in fields):
        return b"" if all(r.how == "remove" for r in fields if r.field == "*") else _MASK_BYTES
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _MASK_BYTES
    if not isinstance(data, dict):
        return _MASK_BYTES
    for rule in fields:
        _mask_json(data, rule.field.split("."), rule.how == "remove")
    return json.dumps(data, ensure_ascii=False).encode()


def mask_properties(properties: dict, rules: list) -> dict:
    shown = dict(properties)
    for rule in (r for r in rules if r.part == "property"):
        names = list(shown) if rule.field == "*" else [rule.field]
        for name in names:
            if name in shown:
                if rule.how == "remove":
                    del shown[name]
                else:
                    shown[name] = MASK
    return shown


def mask_keys(keys: list, rules: list) -> list:
    key_rules = [r for r in rules if r.part == "key"]
    if not key_rules:
        return list(keys)
    if any(r.how == "remove" for r in key_rules):
        return []
    return [MASK for _ in keys]


def masked(message: Any, rules: list) -> Any:
    """The message (a ``StoredMessage`` or ``StoredEvent``) with ``rules`` applied."""
    changes: dict[str, Any] = {"body": mask_body(message.body, rules)}
    if hasattr(message, "properties"):
        changes["properties"] = mask_properties(message.properties, rules)
    if hasattr(message, "keys") and isinstance(message.keys, list):
        changes["keys"] = mask_keys(message.keys, rules)
    return message._replace(**changes)


class MaskingStore:
    """A store whose read methods mask each message for ``permissions`` (the rest is the
    store's own)."""

    def __init__(self, store: Any, permissions: Any) -> None:
        self._store = store
        self._permissions = permissions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _shown(self, message: Any) -> Any:
        rules = self._permissions.masks_for(message.topic)
        if rules is None:
            return message
        if not rules:
            raise PermissionDenied(
                f"Your roles do not allow you to read the topic {message.topic!r}."
            )
        return masked(message, rules)

    def _all(self, messages: list) -> list:
        return [self._shown(m) for m in messages]

    def read(self, *args: Any, **kwargs: Any) -> list:
        return self._all(self._store.read(*args, **kwargs))

    def read_result(self, *args: Any, **kwargs: Any) -> Any:
        result = self._store.read_result(*args, **kwargs)
        return result._replace(messages=self._all(result.messages))

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._shown(self._store.get(*args, **kwargs))

    def query_by_key(self, *args: Any, **kwargs: Any) -> list:
        return self._all(self._store.query_by_key(*args, **kwargs))

    def pull(self, *args: Any, **kwargs: Any) -> list:
        return self._all(self._store.pull(*args, **kwargs))

    def read_stream(self, *args: Any, **kwargs: Any) -> Any:
        result = self._store.read_stream(*args, **kwargs)
        shown = type(result)(self._all(result))
        shown.__dict__.update(getattr(result, "__dict__", {}))
        return shown


def store_for_request(store: Any) -> Any:
    """``store``, or a ``MaskingStore`` over it for the current read-only request of a
    user who reads some topic masked."""
    request = current_request.get()
    if request is None or (request.method or "GET").upper() not in ("GET", "HEAD"):
        return store
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return store
    from console.accounts.permissions import permissions_of

    permissions = permissions_of(user)
    if not permissions.reads_masked:
        return store
    return MaskingStore(store, permissions)
