"""A topic's kind, the one rule for it: plain, stream, retry or DLQ; and creating a topic of a kind.

``plain`` and ``stream`` topics are created by people (``create_topic_of_kind``); a
``retry`` (``%RETRY%<group>``) or ``dlq`` (``%DLQ%<group>``) topic is a group's own, made by
its consumers, and never created here (``check_new_topic_name`` refuses those names).
"""

from __future__ import annotations

from storeadapter.engine import DLQ_PREFIX, RETRY_PREFIX, MessageStore, TopicInfo

PLAIN = "plain"
STREAM = "stream"
RETRY = "retry"
DLQ = "dlq"
#: The kinds a person may create, with the words the console shows for them.
CREATABLE_KINDS: tuple[tuple[str, str], ...] = (
    (PLAIN, "Plain: messages appended one by one, by key or by queue"),
    (STREAM, "Stream: the events of streams, each appended at its version"),
)
CREATABLE_KIND_NAMES: tuple[str, ...] = tuple(value for value, _ in CREATABLE_KINDS)
#: Every kind and its label in lists.
KIND_LABELS: dict[str, str] = {PLAIN: "plain", STREAM: "stream", RETRY: "retry", DLQ: "DLQ"}


def kind_of(info: TopicInfo) -> str:
    """The topic's kind: a group's retry or DLQ topic by its name, else stream or plain."""
    if info.name.startswith(RETRY_PREFIX):
        return RETRY
    if info.name.startswith(DLQ_PREFIX):
        return DLQ
    return STREAM if info.streams else PLAIN


def create_topic_of_kind(store: MessageStore, name: str, queues: int, kind: str) -> TopicInfo:
    """Create a plain or a stream topic (the engine checks the name and queue count).

    Raises ValueError for any other kind.
    """
    if kind == STREAM:
        return store.create_stream_topic(name, queues)
    if kind == PLAIN:
        return store.create_topic(name, queues)
    creatable = ", ".join(value for value, _ in CREATABLE_KINDS)
    raise ValueError(f"a topic's kind is one of {creatable}, not {kind!r}")
