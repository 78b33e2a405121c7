"""Group-wide operations for the console and API: copy a group's offsets, delete a group."""

from __future__ import annotations

from storeadapter.engine import MessageStore, OffsetChange, StoreError


def copy_offsets(store: MessageStore, source: str, target: str, who: str) -> list[OffsetChange]:
    """Give ``target`` the committed offsets ``source`` has, topic by topic.

    Each topic's queues are committed together (all or none); topics ``target`` has
    offsets on but ``source`` has not are left alone.
    """
    if source == target:
        raise StoreError("a group's offsets cannot be copied onto the same group")
    known = {info.name for info in store.topics()}
    offsets: dict[str, dict[int, int]] = {}
    for (topic, queue), committed in store.committed_offsets(source).items():
        if topic in known:
            offsets.setdefault(topic, {})[queue] = committed
    if not any(offsets.values()):
        raise StoreError(f"group {source!r} has no committed offsets to copy")
    changes = []
    for topic, queues in offsets.items():
        if queues:
            changes += store.commit_offsets(target, topic, queues, who=who, reason=f"copy:{source}")
    return changes
