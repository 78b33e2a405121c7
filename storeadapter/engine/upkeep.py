"""Retention and the disk: delete_expired, expiry_forecast, disk-use probes.

A part of ``MessageStore`` (store.py), which mixes it in; it uses the store's state.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Callable, Collection

from . import clock, fileio
from .consumequeue import ConsumeQueue
from .metadata import LAYOUT_FILES
from .retention import (
    QueueDrop,
    RetentionReport,
    choose_segments,
    expired_below,
    first_segment_from,
    segment_newest_time,
)
from .segment import segment_name


class Upkeep:
    """Retention and the disk: delete_expired, expiry_forecast, disk-use probes."""

    def retention_plan(self, now_ms: int | None = None) -> list[dict]:
        """The segments ``delete_expired`` would delete now, oldest first.

        Each ``{"name", "base", "end", "reason"}`` (reason ``expired`` or ``disk``), so a
        caller can archive them first. Appends meanwhile may change the plan (a disk-forced
        deletion can grow); ``delete_expired(may_delete=...)`` guards against that.
        """
        self._check_open()
        self._follow()
        now = clock.now_ms() if now_ms is None else now_ms
        with self._flush_lock:
            return [
                {**_segment_info(segment), "reason": reason}
                for segment, reason in self._choose(now)
            ]

    def _choose(self, now: int) -> list:
        used, total = fileio.disk_usage(self.path)
        retention_ms = int(self.config.retention_hours * 3_600_000)
        return choose_segments(
            self.commitlog,
            now,
            retention_ms,
            used / total if total else 0.0,
            self.config.disk_force_ratio,
            self.config.disk_warn_ratio,
            1 / total if total else 0.0,
            self._kept_by_topics(now, retention_ms),
        )

    def _topic_retention_ms(self, info) -> int:
        hours = info.settings.get("retention_hours", self.config.retention_hours)
        return int(hours * 3_600_000)

    def _kept_by_topics(self, now: int, retention_ms: int) -> int | None:
        """The lowest commit-log offset a topic retained longer than the store still
        keeps (its first record not past its hours); None when no topic keeps any.

        A topic with files per queue: exactly, from each queue's time index; a shared
        topic (its queues are too many to look at): every segment from the first with a
        record not past its hours."""
        keep: int | None = None
        for topic in self._registry.topics.values():
            own_ms = self._topic_retention_ms(topic.info)
            if own_ms <= retention_ms:
                continue
            cutoff = now - own_ms
            if topic.info.layout != LAYOUT_FILES:
                found = first_segment_from(self.commitlog, cutoff)
                keep = found if keep is None else min(keep, found)
                continue
            for queue in topic.queues:
                offset = self._reader.offset_for_time(queue, cutoff)
                entry = queue.entry(offset) if offset < queue.max_offset else None
                if entry is not None:
                    keep = entry[0] if keep is None else min(keep, entry[0])
        return keep

    def _topic_floors(self, now: int) -> dict[str, int]:
        """The topics retained shorter than the store whose queues must now start
        further on: name → their new ``retained_from`` (a commit-log offset)."""
        retention_ms = int(self.config.retention_hours * 3_600_000)
        floors = {}
        for name, topic in self._registry.topics.items():
            own_ms = self._topic_retention_ms(topic.info)
            if own_ms >= retention_ms:
                continue
            below = expired_below(self.commitlog, now - own_ms)
            if below > max(topic.info.retained_from, self.commitlog.min_offset):
                floors[name] = below
        return floors

    def delete_expired(
        self,
        now_ms: int | None = None,
        may_delete: Callable[[dict], bool] | None = None,
    ) -> RetentionReport:
        """Delete whole commit-log segments past retention (or past the disk limits).

        Oldest first, never the active segment. Queue minimum offsets move past the
        deleted records, and consume-queue and key-index files wholly below them go too.
        The report says what was freed and, per queue and group, how many of the dropped
        messages the group had not consumed.

        ``may_delete`` is asked about each chosen segment in order (``{"name", "base",
        "end", "reason"}``, under the store's write lock, so it must be quick, e.g. a look
        at an archive's manifest); at the first it refuses, that segment and every later
        one are kept and listed in the report's ``held_segments``.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        retention_ms = int(self.config.retention_hours * 3_600_000)
        with self._flush_lock, self._exclusive():
            used, total = fileio.disk_usage(self.path)
            report = RetentionReport(now, retention_ms, used / total if total else 0.0)
            plan = self._choose(now)
            if may_delete is not None:
                for position, (segment, reason) in enumerate(plan):
                    if not may_delete({**_segment_info(segment), "reason": reason}):
                        report.held_segments = [
                            {**_segment_info(held), "reason": why} for held, why in plan[position:]
                        ]
                        plan = plan[:position]
                        break
            floors = self._topic_floors(now)
            if plan or floors:
                # Every queue of a topic with files per queue; the queues used so far of a
                # shared one (a million queues are not all loaded to report on them).
                before = {
                    (name, queue.owner[1]): queue.min_offset
                    for name, topic in self._registry.topics.items()
                    for queue in topic.made_queues()
                }
                for name, floor in floors.items():  # topics retained shorter
                    self._change_topic(self._registry.topics[name], retained_from=floor)
                if plan:
                    new_min = plan[-1][0].end
                    for segment, reason in plan:
                        report.deleted_segments.append({**_segment_info(segment), "reason": reason})
                        report.freed_bytes += os.fstat(segment.fd).st_blocks * 512
                    self.commitlog.drop_below(new_min)
                self._advance_queue_mins()
                if plan:
                    report.index_files_deleted = self._index.delete_below(new_min)
                report.queues = self._queue_drops(before)
                if plan:
                    self._publish(min_offset=self.commitlog.min_offset)
            report.disk_ratio_after = self._disk.measure()
        self.last_retention = report
        fileio.write_atomic(self.path / "retention.json", json.dumps(report.as_dict()).encode())
        return report

    def _queue_drops(self, before: dict[tuple[str, int], int]) -> list[QueueDrop]:
        drops = []
        for (name, queue_id), old_min in before.items():
            topic = self._registry.topics.get(name)
            if topic is None:
                continue
            new_min = topic.queues[queue_id].min_offset
            if new_min == old_min:
                continue
            drop = QueueDrop(name, queue_id, old_min, new_min)
            for group in self._offsets.groups_on(name, queue_id):
                committed = self._offsets.get(group, name, queue_id)
                drop.unconsumed_by_group[group] = max(0, new_min - max(committed, old_min))
            drops.append(drop)
        return drops

    def expiry_forecast(
        self, now_ms: int | None = None, topics: Collection[str] | None = None
    ) -> list[dict]:
        """When retention will next delete messages each group has not consumed.

        One row per group and queue with unconsumed messages in a sealed segment:
        ``expires_at_ms`` (when that segment passes retention), ``messages`` (how many
        unconsumed messages of that queue it holds) and ``overdue`` (already past it).
        Messages still in the active segment are not at risk until it is sealed. With
        ``topics``, only the queues of those topics are looked at (each committed queue
        costs a read of its entries).
        """
        self._check_open()
        self._follow()
        now = clock.now_ms() if now_ms is None else now_ms
        log = self.commitlog
        segments = list(log.segments)
        bases = [segment.base for segment in segments]
        newest_times: dict[int, int | None] = {}
        wanted = None if topics is None else set(topics)
        rows = []
        for (group, name, queue_id), committed in sorted(self._offsets.positions().items()):
            if wanted is not None and name not in wanted:
                continue
            topic = self._registry.topics.get(name)
            if topic is None or queue_id >= len(topic.queues):
                continue
            retention_ms = self._topic_retention_ms(topic.info)
            queue = topic.queues[queue_id]
            start = max(committed, queue.min_offset)
            entry = queue.entry(start) if start < queue.max_offset else None
            if entry is None:
                continue
            position = bisect.bisect_right(bases, entry[0]) - 1
            if position < 0 or position >= len(segments) - 1 or entry[0] >= segments[position].end:
                continue
            if position not in newest_times:
                newest_times[position] = segment_newest_time(log, position)
            newest = newest_times[position]
            if newest is None:
                continue
            rows.append(
                {
                    "group": group,
                    "topic": name,
                    "queue": queue_id,
                    "committed_offset": committed,
                    "expires_at_ms": newest + retention_ms,
                    "overdue": newest + retention_ms <= now,
                    "messages": self._entries_below(queue, start, segments[position].end),
                }
            )
        return rows

    def segment_first_store_time(self, base: int) -> int | None:
        """The store time of the first record of the segment starting at ``base``."""
        self._check_open()
        found = self.commitlog.locate(base)
        if found is None or found[1] != 0:
            return None
        return self.commitlog.first_store_time(found[0])

    def _entries_below(self, queue: ConsumeQueue, start: int, offset: int) -> int:
        """How many entries from ``start`` point below commit-log ``offset``."""
        low, high = start, queue.max_offset
        while low < high:
            middle = (low + high) // 2
            entry = queue.entry(middle)
            if entry is not None and entry[0] >= offset:
                high = middle
            else:
                low = middle + 1
        return low - start

    def _advance_queue_mins(self, names: Collection[str] | None = None) -> None:
        """Move every loaded queue's minimum (of the topics ``names``, else all) up to
        its floor (``queue_floor``); the files wholly below it go, and their directories
        are fsynced."""
        for name, topic in self._registry.topics.items():
            if names is not None and name not in names:
                continue
            floor = self.queue_floor(topic)
            for queue in topic.made_queues():
                if not queue.loaded:
                    continue
                queue.advance_min(floor)
                if queue.files_removed:
                    queue.sync_directory()
            if topic.blocks is not None and drop_unused_blocks(topic, floor):
                fileio.fsync_dir(topic.blocks.directory)

    def queue_floor(self, topic) -> int:
        """The commit-log offset the queues of ``topic`` (a registry's Topic, or None)
        start at or past: the log's first, or the topic's ``retained_from`` when its own
        retention is past it."""
        log_min = self.commitlog.min_offset
        return max(log_min, topic.info.retained_from) if topic is not None else log_min

    def _follow_topic_floors(self, before: dict[str, int]) -> None:
        """After another process changed topics.json: advance the queues of the topics
        whose ``retained_from`` moved (``before``: name → it, as it was here)."""
        moved = {
            name
            for name, topic in self._registry.topics.items()
            if topic.info.retained_from > before.get(name, 0)
        }
        if moved:
            self._advance_queue_mins(moved)


def _segment_info(segment) -> dict:
    return {"name": segment_name(segment.base), "base": segment.base, "end": segment.end}


def drop_unused_blocks(topic, log_min: int) -> int:
    """Delete a shared topic's block files whose blocks hold only entries below the
    log's minimum (retention deleted their records). A queue's last block stays: it marks
    where the queue ends."""
    blocks = topic.blocks
    per = blocks.entries_per_block
    made = {queue.owner[1]: queue for queue in topic.made_queues() if queue.loaded}

    def in_use(queue_id: int, seq: int) -> bool:
        seqs = blocks.seq_range(queue_id)
        if seqs is None or seq >= seqs[1]:
            return True
        queue = made.get(queue_id)
        if queue is not None:
            return (seq + 1) * per > queue.min_offset
        last = blocks.entry(queue_id, seq * per + per - 1)
        return last is None or last[0] >= log_min

    return blocks.drop_files(in_use)
