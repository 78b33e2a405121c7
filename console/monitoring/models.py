"""The sampled history of the store, in the Django database.

Every sample (``sampler.take_sample``, every ``TIDEMARK_SAMPLE_INTERVAL_S``) writes:

- one ``StoreSample``: disk use and store-wide totals;
- one ``TopicSample`` per topic: its queues' max offsets as a JSON list;
- one ``GroupSample`` per (group, topic the group has committed on): per queue of the topic
  the committed offset, lag, last commit time, lag in seconds and status, as JSON lists.

So a store with 1,000 topics of 10 queues and 200 groups makes about 2,000 rows per sample,
not 20,000. Each row has its sample time (``ts_ms``, the same for every row of one sample)
and a resolution in seconds: 10 when written, 60 or 3600 once ``downsample`` thinned it
(RabbitMQ-style: 10 s points for 6 h, one point per minute for 7 days, one per hour for 90
days). Counters (``appended``, ``consumed``) only ever grow, so the rate between any two
kept points is the difference over the time between them, whatever was thinned in between.

Two small state tables carry what each sample needs from the ones before it, so that a
sample never reads history: ``OffsetTimeline`` (per topic, each queue's (max offset, time)
points, thinned as they age: lag in seconds is interpolated on them) and ``CommitWindow``
(per group and topic, each queue's last N commits as (offset, time, lag): the Burrow-style
status is computed on them).
"""

from __future__ import annotations

from django.db import models

#: Resolutions, in seconds: raw samples, then minute and hour points.
RES_RAW = 10
RES_MINUTE = 60
RES_HOUR = 3600
RESOLUTIONS = [(RES_RAW, "10 s"), (RES_MINUTE, "1 min"), (RES_HOUR, "1 h")]


class StoreSample(models.Model):
    """The whole store at one sample."""

    ts_ms = models.BigIntegerField(unique=True)
    resolution = models.PositiveIntegerField(choices=RESOLUTIONS, default=RES_RAW)
    #: A random token per sample: readers cache what they derive from a sample under it.
    token = models.CharField(max_length=32)
    disk_bytes = models.BigIntegerField()
    disk_ratio = models.FloatField()
    topics = models.PositiveIntegerField()
    queues = models.PositiveIntegerField()
    groups = models.PositiveIntegerField()
    #: Messages held (max − min offset, over every queue).
    messages = models.BigIntegerField()
    #: Messages not yet consumed, over every group and queue.
    backlog = models.BigIntegerField()
    #: The least and most ``backlog`` of the points this one stands for once thinned (as
    #: written: ``backlog`` itself), so that a coarser chart still shows a peak.
    backlog_min = models.BigIntegerField(null=True, blank=True)
    backlog_max = models.BigIntegerField(null=True, blank=True)
    #: Counters: messages appended and consumed (committed past) since sampling began.
    appended = models.BigIntegerField()
    consumed = models.BigIntegerField()
    #: How long the sample took (ms).
    duration_ms = models.FloatField(default=0)

    def __str__(self) -> str:
        return f"store sample at {self.ts_ms}"


class TopicSample(models.Model):
    """One topic at one sample."""

    ts_ms = models.BigIntegerField()
    resolution = models.PositiveIntegerField(choices=RESOLUTIONS, default=RES_RAW)
    topic = models.CharField(max_length=255)
    #: Each queue's max offset (the next offset to be written), by queue id.
    max_offsets = models.JSONField()
    #: Messages held (max − min offset over its queues).
    messages = models.BigIntegerField()
    #: Counter of messages appended to the topic since it was first sampled.
    appended = models.BigIntegerField()
    #: A big topic (more than ``TIDEMARK_BIG_TOPIC_QUEUES`` queues) is sampled as one
    #: virtual queue: ``max_offsets`` holds one number, the sum of its queues' max offsets,
    #: and its totals are summed from ``QueueChunk`` rows (see sampler.py).
    aggregated = models.BooleanField(default=False)
    #: The topic's queues, and how many of them this sample read (fewer when rotating).
    queue_count = models.PositiveIntegerField(default=0)
    sampled_queues = models.PositiveIntegerField(default=0)
    #: The oldest reading the totals include (a big topic's stalest chunk); else ts_ms.
    oldest_ms = models.BigIntegerField(null=True, blank=True)
    #: A big topic's last write as the sampler saw it: the sample at which its max offsets
    #: last grew (None: not seen to grow yet).
    last_write_ms = models.BigIntegerField(null=True, blank=True)
    #: Bytes of the records the topic holds (each record whole: headers, keys,
    #: properties, body), as counted from its consume-queue entries (sizes.py); None
    #: while the count has not caught up with every queue yet.
    size_bytes = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["topic", "ts_ms"], name="mon_topic_sample_once")
        ]
        indexes = [models.Index(fields=["ts_ms"], name="mon_topic_ts")]

    def __str__(self) -> str:
        return f"{self.topic} at {self.ts_ms}"


class GroupSample(models.Model):
    """One group on one topic at one sample; the lists are by queue id of the topic."""

    ts_ms = models.BigIntegerField()
    resolution = models.PositiveIntegerField(choices=RESOLUTIONS, default=RES_RAW)
    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    #: Committed offset per queue (None: never committed there).
    committed = models.JSONField()
    #: Lag in messages per queue, from the committed offset (or, never committed, from the
    #: queue's first offset): what retention deleted unconsumed still counts.
    lags = models.JSONField()
    #: Time (ms) of each queue's last commit, None when unknown.
    last_commits = models.JSONField()
    #: Lag in seconds per queue: the age of the oldest unconsumed message from its store
    #: time (a big topic's virtual queue: the oldest over its chunks, interpolated on
    #: sampled offsets only while no chunk knows it); 0 at lag 0, None when unknown.
    lag_seconds = models.JSONField()
    #: Burrow's status per queue; None for a queue never committed on (left out).
    statuses = models.JSONField()
    #: Sum of ``lags``, and the worst of ``statuses``.
    lag = models.BigIntegerField()
    status = models.CharField(max_length=8)
    #: Why ``status``, in words: the worst queue and the rule it met.
    status_reason = models.CharField(max_length=500, blank=True, default="")
    #: Over the points this one stands for once thinned (as written: its own values): the
    #: least and most ``lag`` and the worst ``status``, so that a coarser chart keeps peaks.
    lag_min = models.BigIntegerField(null=True, blank=True)
    lag_max = models.BigIntegerField(null=True, blank=True)
    worst_status = models.CharField(max_length=8, blank=True, default="")
    #: The most lag in seconds over its queues and over the points this one stands for
    #: once thinned (as written: the most of ``lag_seconds``): a short peak stays on a
    #: coarser chart.
    lag_seconds_max = models.FloatField(null=True, blank=True)
    #: Unconsumed messages retention deleted (the queue's first offset less the committed
    #: offset), in total and per queue.
    lost = models.BigIntegerField(default=0)
    lost_per_queue = models.JSONField(default=list)
    #: Counter of messages the group committed past on this topic since first sampled.
    consumed = models.BigIntegerField()
    #: Earliest time retention deletes messages of this topic the group has not consumed.
    expires_at_ms = models.BigIntegerField(null=True, blank=True)
    #: On a big topic's virtual queue (``TopicSample.aggregated``): the lists have one item
    #: for the whole topic, ``lag`` and ``queues_behind`` are summed from ``QueueChunk``.
    aggregated = models.BooleanField(default=False)
    queues_behind = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["group", "topic", "ts_ms"], name="mon_group_sample_once"
            )
        ]
        indexes = [models.Index(fields=["ts_ms"], name="mon_group_ts")]

    def __str__(self) -> str:
        return f"{self.group} on {self.topic} at {self.ts_ms}"


class OffsetTimeline(models.Model):
    """Per topic, each queue's (max offset, time) points: see ``lag.add_point``."""

    topic = models.CharField(max_length=255, unique=True)
    #: By queue id: a list of [max offset, time ms], oldest first.
    points = models.JSONField(default=list)
    updated_ms = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"offset timeline of {self.topic}"


class CommitWindow(models.Model):
    """Per group and topic, each queue's last N commits: see ``status.queue_status``."""

    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    #: By queue id: a list of [committed offset, commit time ms, lag then], oldest first.
    commits = models.JSONField(default=list)
    updated_ms = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "topic"], name="mon_commit_window_once")
        ]

    def __str__(self) -> str:
        return f"commit window of {self.group} on {self.topic}"


class QueueChunk(models.Model):
    """A big topic's queues ``first_queue`` to ``first_queue + queues - 1`` as the sampler
    last read them: totals only, no per-queue values, so that a topic of a million queues
    is read a rotating share at a time and its totals are the sum of its chunks."""

    topic = models.CharField(max_length=255)
    first_queue = models.PositiveIntegerField()
    queues = models.PositiveIntegerField()
    #: Messages held, and the sum of the queues' max offsets.
    messages = models.BigIntegerField()
    max_sum = models.BigIntegerField()
    #: Queues holding messages.
    nonempty = models.PositiveIntegerField(default=0)
    #: Group → [lag, queues behind, sum of consumed positions, store time (ms) of the
    #: oldest unconsumed message or None, queues stuck with no commit (STOP), queues stuck
    #: committing the same offset (STALL)] over these queues. A queue is stuck when its
    #: committed offset has not moved, with lag, for longer than the status window.
    groups = models.JSONField(default=dict)
    #: Group → its lagging queues as [queue, committed offset or None, first reading at
    #: that offset (ms), store time of the message there (ms) or None]: what the next
    #: reading compares with, so a queue whose offset did not move is not read again.
    lagging = models.JSONField(default=dict)
    sampled_ms = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["topic", "first_queue"], name="mon_queue_chunk_once")
        ]

    def __str__(self) -> str:
        return f"{self.topic} queues from {self.first_queue}"


class RuleTiming(models.Model):
    """How long the latest evaluation of each alert rule took (written by
    ``console.alerts.evaluate.evaluate``, read for /metrics by ``rule_timings``): a row
    per rule, replaced at each evaluation, so that the web process sees what the worker
    measured."""

    rule_id = models.PositiveIntegerField(unique=True)
    rule_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20)
    #: Seconds the rule's readings, transitions and notifications took.
    seconds = models.FloatField()
    evaluated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.rule_name}: {self.seconds:.3f} s"


class TopicMinuteStats(models.Model):
    """One topic in one minute of store time, as the Spark statistics job counted it
    (``manage.py topic_stats``; ``storeadapter.spark.jobs.stats``): history that outlives
    the sampler's retention. A rerun over the same minutes replaces their rows."""

    topic = models.CharField(max_length=255)
    #: The minute's start (store time, ms since the epoch).
    minute_ms = models.BigIntegerField()
    messages = models.BigIntegerField()
    #: Sum of the body lengths.
    bytes = models.BigIntegerField()
    distinct_keys = models.BigIntegerField()
    #: Body-size bucket (``le_64`` … ``gt_16k``) to its count of messages.
    size_histogram = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["topic", "minute_ms"], name="mon_topic_minute_once")
        ]
        indexes = [models.Index(fields=["minute_ms"], name="mon_topic_minute_ts")]

    def __str__(self) -> str:
        return f"{self.topic} in the minute at {self.minute_ms}"


class TopicBytes(models.Model):
    """What the sampler has counted of a topic's size (see sizes.py): for its queues
    ``first_queue`` on (a small topic: one row for all of them; a big one: a row per
    chunk), how far each queue's entries were read and the bytes of their records per
    commit-log segment."""

    topic = models.CharField(max_length=255)
    first_queue = models.PositiveIntegerField()
    #: {"created_ms": the topic's creation time, "generations": its queues' removal
    #: count (a change means a queue was removed: counted again), "counted": per queue
    #: the offset its entries were read up to, "segments": {segment base offset as text:
    #: bytes of those records in that segment}}.
    state = models.JSONField(default=dict)
    updated_ms = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["topic", "first_queue"], name="mon_topic_bytes_once")
        ]

    def __str__(self) -> str:
        return f"bytes of {self.topic} from queue {self.first_queue}"
