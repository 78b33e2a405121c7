"""Topic and queue changes, each written to the audit log."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from console.audit.log import record
from console.core.store import get_store
from console.monitoring.scale import SampledFigures, is_big
from storeadapter.engine import TOPIC_SETTINGS, AppendResult, EventAppendResult, TopicInfo
from storeadapter.summaries import queue_rows
from storeadapter.topic_kinds import PLAIN, create_topic_of_kind


def topic_url(topic: str) -> str:
    return reverse("topics:detail", args=[topic])


def create_topic(user: Any, name: str, queues: int, kind: str = PLAIN) -> TopicInfo:
    """Create a plain or a stream topic (storeadapter.topic_kinds)."""
    info = create_topic_of_kind(get_store(), name, queues, kind)
    record(
        user,
        "topic.create",
        f"topic {info.name}",
        after={"name": info.name, "queues": info.queues, "kind": kind},
        link=topic_url(info.name),
    )
    return info


def delete_topic(user: Any, name: str) -> int | None:
    """Delete the topic; returns how many messages it held (of a big topic: as last
    sampled, None if never; counting them would read every queue)."""
    store = get_store()
    info = store.topic(name)
    before: dict[str, Any] = {"name": name, "queues": info.queues}
    if is_big(info):
        sampled = SampledFigures().topic(name)
        messages = sampled.messages if sampled is not None else None
        before["messages"] = messages
        before["messages_sampled_ms"] = sampled.sampled_ms if sampled is not None else None
    else:
        messages = sum(row.messages for row in queue_rows(store, name))
        before["messages"] = messages
    store.delete_topic(name)
    record(user, "topic.delete", f"topic {name}", before=before)
    return messages


def add_queues(user: Any, topic: str, count: int) -> TopicInfo:
    store = get_store()
    before = store.topic(topic).queues
    changed = store.add_queues(topic, count)
    record(
        user,
        "queue.add",
        f"topic {topic}",
        before={"queues": before},
        after={"queues": changed.queues},
        link=topic_url(topic),
    )
    return changed


def remove_queue(user: Any, topic: str, queue: int) -> TopicInfo:
    store = get_store()
    before = store.topic(topic).queues
    changed = store.remove_queue(topic, queue)
    record(
        user,
        "queue.remove",
        f"topic {topic} queue {queue}",
        before={"queues": before},
        after={"queues": changed.queues},
        link=topic_url(topic),
    )
    return changed


def set_frozen(user: Any, topic: str, queue: int, frozen: bool) -> bool:
    """Freeze or unfreeze a queue; False (and no audit row) when it already was so."""
    store = get_store()
    info = store.topic(topic)
    if (queue in info.frozen) == frozen and 0 <= queue < info.queues:
        return False
    if frozen:
        store.freeze_queue(topic, queue)
    else:
        store.unfreeze_queue(topic, queue)
    record(
        user,
        "queue.freeze" if frozen else "queue.unfreeze",
        f"topic {topic} queue {queue}",
        before={"frozen": not frozen},
        after={"frozen": frozen},
        link=topic_url(topic),
    )
    return True


def send_test_message(
    user: Any,
    topic: str,
    body: bytes | str,
    key: str | None = None,
    tag: str | None = None,
    properties: dict[str, str] | None = None,
) -> AppendResult:
    """One message typed by a person in the console, audited as such."""
    result = get_store().append(topic, body, key=key, tag=tag, properties=properties or None)
    record(
        user,
        "message.send",
        f"topic {topic}",
        after={
            "message_id": result.message_id,
            "queue": result.queue,
            "offset": result.queue_offset,
        },
        detail=f"test message {result.message_id}",
        link=reverse("messages:detail", args=[result.message_id]),
    )
    return result


def append_typed_event(
    user: Any,
    topic: str,
    stream_id: str,
    body: bytes | str,
    expected_version: int | None = None,
    command_id: str | None = None,
    event_type: str | None = None,
) -> EventAppendResult:
    """One event typed by a person in the console, appended to a stream, audited as such.

    The engine's refusals (WrongExpectedVersionError, DuplicateCommandError, …) propagate.
    """
    result = get_store().append_event(
        topic,
        stream_id,
        body,
        expected_version=expected_version,
        command_id=command_id,
        event_type=event_type,
    )
    record(
        user,
        "event.append",
        f"topic {topic} stream {stream_id}",
        before={"expected_version": expected_version},
        after={
            "version": result.version,
            "message_id": result.message_id,
            "command_id": command_id,
            "event_type": event_type,
        },
        detail=f"event {result.version} of stream {stream_id}",
        link=reverse("messages:detail", args=[result.message_id]),
    )
    return result


def set_topic_settings(user: Any, topic: str, changes: dict[str, int | None]) -> dict[str, Any]:
    """Set some of a topic's own settings (None: back to the store's default), audited
    with who and each changed setting's value before → after (null: the store's default).

    Returns ``{"changed": {name: (before, after)}, "settings": effective values}``; no
    audit row when nothing changed. The engine's refusals (InvalidSettingError,
    TopicNotFoundError) propagate.
    """
    store = get_store()
    own_before = dict(store.topic(topic).settings)
    own_after = store.set_topic_settings(topic, changes).settings
    changed = {
        name: (own_before.get(name), own_after.get(name))
        for name in changes
        if own_before.get(name) != own_after.get(name)
    }
    if changed:
        defaults = {s.name: s.default(store.config) for s in TOPIC_SETTINGS}

        def shown(name: str, value: int | None) -> str:
            return f"{value}" if value is not None else f"store default ({defaults[name]})"

        record(
            user,
            "topic.settings",
            f"topic {topic}",
            before={name: was for name, (was, _) in changed.items()},
            after={name: now for name, (_, now) in changed.items()},
            detail="; ".join(
                f"{name} {shown(name, was)} → {shown(name, now)}"
                for name, (was, now) in changed.items()
            ),
            link=topic_url(topic) + "#settings",
        )
    return {"changed": changed, "settings": store.topic_settings(topic)}
