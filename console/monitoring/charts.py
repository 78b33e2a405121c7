"""Plotly figures of the sampled history, for /monitoring/charts/<kind>/.

Each range is drawn at the resolution tier that covers it without drawing more than
``MAX_POINTS`` points per series: 1 h at 10 s (360 points), 6 h and 24 h at 1 minute (360
and 1,440), 7 d and 30 d at 1 hour (168 and 720), 90 d (as far back as history is kept) at
2 hours (1,080). Rows finer than that (the recent part of a long range) are thinned the way
downsampling thins them: the last point of each bucket, with the bucket's least and most
lag (backlog) and its worst status, so a peak between two points is never lost: the lag
and backlog charts draw that "most in the span" envelope above the last values, and the
status chart the worst status of each span. Rates are the difference of a counter between
consecutive points, over the time between them; drain time uses the rates over the rate
window (console/monitoring/current.py), as the group page does.

``topic-history`` draws the Spark statistics job's ``TopicMinuteStats`` rows instead (they
outlive the sampler's retention; 30 d and 90 d are offered for it too): messages and bytes
per minute, averaged over 1-minute, 1-hour or 1-day buckets (at most MAX_POINTS of them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import plotly.graph_objects as go
from django.conf import settings
from plotly.subplots import make_subplots

from console.core.store import store_config
from console.monitoring import lag as lagmath
from console.monitoring.current import rate_window_ms
from console.monitoring.metrics import GROUP_STATUSES, group_status
from console.monitoring.models import (
    RES_HOUR,
    RES_MINUTE,
    RES_RAW,
    GroupSample,
    StoreSample,
    TopicMinuteStats,
    TopicSample,
)
from console.monitoring.status import worse
from storeadapter.engine import clock as engine_clock

HOUR_S = 3600
#: The ranges offered, in seconds.
DAY_S = 24 * HOUR_S
#: The ranges offered, in seconds: up to the 90 days the sampled history is kept.
RANGES: dict[str, int] = {
    "1h": HOUR_S,
    "6h": 6 * HOUR_S,
    "24h": DAY_S,
    "7d": 7 * DAY_S,
    "30d": 30 * DAY_S,
    "90d": 90 * DAY_S,
}
MAX_POINTS = 1500
KINDS = ("dashboard", "group", "topic", "topic-history", "storage")
#: The ranges of the topic-history chart (the Spark statistics' rows): the same.
HISTORY_RANGES: dict[str, int] = dict(RANGES)


def resolution_for(range_s: int) -> int:
    """The finest tier (10 s, 1 min, 1 h) that draws ``range_s`` in at most MAX_POINTS."""
    for resolution in (RES_RAW, RES_MINUTE, RES_HOUR):
        if range_s / resolution <= MAX_POINTS:
            return resolution
    return RES_HOUR


def step_for(range_s: int) -> int:
    """The bucket (s) a range is drawn with: its tier, or whole hours past the hour tier."""
    resolution = resolution_for(range_s)
    if range_s / resolution <= MAX_POINTS:
        return resolution
    return -(-range_s // (MAX_POINTS * RES_HOUR)) * RES_HOUR


#: (value, least, most) field names a thinned row's envelope is taken over.
Envelope = tuple[str, str, str]
GROUP_ENVELOPE: Envelope = ("lag", "lag_min", "lag_max")
STORE_ENVELOPE: Envelope = ("backlog", "backlog_min", "backlog_max")


def thin(
    rows: Iterable,
    step_s: int,
    series: Callable[[object], object] = lambda row: None,
    envelope: Envelope | None = None,
    peak_of: Callable[[object], float | None] | None = None,
):
    """The last row of each ``step_s`` bucket of each series, in time order.

    With ``envelope`` (value, least, most), each kept row also gets ``trough`` and
    ``peak``: the least and most value over its bucket (a row thinned before brings its
    own least and most), and, when rows have a ``worst_status``, ``worst``: the worst
    status over the bucket. With ``peak_of`` (a row's own peak of another figure), each
    kept row gets ``most``: the largest over its bucket (None when no row had one).
    """
    step_ms = step_s * 1000
    last: dict[tuple, object] = {}
    spans: dict[tuple, list] = {}
    peaks: dict[tuple, float | None] = {}
    for row in rows:
        key = (series(row), row.ts_ms // step_ms)
        held = last.get(key)
        if held is None or row.ts_ms >= held.ts_ms:
            last[key] = row
        if peak_of is not None:
            high = peak_of(row)
            if high is not None:
                peaks[key] = high if peaks.get(key) is None else max(peaks[key], high)
        if envelope is not None:
            value, least, most = envelope
            low = _first(getattr(row, least, None), getattr(row, value))
            high = _first(getattr(row, most, None), getattr(row, value))
            worst = getattr(row, "worst_status", "") or getattr(row, "status", "")
            span = spans.get(key)
            if span is None:
                spans[key] = [low, high, worst]
            else:
                span[0], span[1] = min(span[0], low), max(span[1], high)
                span[2] = _worse(span[2], worst)
    for key, (low, high, worst) in spans.items():
        row = last[key]
        row.trough, row.peak, row.worst = low, high, worst
    if peak_of is not None:
        for key, row in last.items():
            row.most = peaks.get(key)
    return sorted(last.values(), key=lambda row: row.ts_ms)


def _first(*values):
    return next(value for value in values if value is not None)


def _group_level(status: str) -> str:
    """OK, WARN or ERR, from a queue's or a group's status."""
    return status if status in GROUP_STATUSES else group_status([status or None])


def _worse(a: str, b: str) -> str:
    return worse(a, b)


def _most_seconds(row) -> float | None:
    """A group row's most lag in seconds: kept when thinned, else over its queues."""
    if row.lag_seconds_max is not None:
        return row.lag_seconds_max
    known = [s for s in row.lag_seconds if s is not None]
    return max(known) if known else None


def _when(ts_ms: int) -> datetime:
    return datetime.fromtimestamp(ts_ms / 1000, UTC)


def _since(range_s: int) -> int:
    return engine_clock.now_ms() - range_s * 1000


def _rates(rows: list, counter: str) -> tuple[list[datetime], list[float]]:
    """Messages per second between consecutive rows of one series."""
    xs, ys = [], []
    for before, after in zip(rows, rows[1:], strict=False):
        then, now = getattr(before, counter), getattr(after, counter)
        xs.append(_when(after.ts_ms))
        ys.append(lagmath.rate(then, before.ts_ms, now, after.ts_ms))
    return xs, ys


def _layout(
    fig: go.Figure,
    title: str,
    empty: bool,
    since: int,
    empty_text: str = "No samples in this range yet.",
) -> go.Figure:
    """Common looks; the x axis spans the whole range asked for; a series of one or two
    points gets markers (a line needs two points to show)."""
    for trace in fig.data:
        if trace.x is not None and len(trace.x) < 3:
            trace.mode = "lines+markers"
    fig.update_layout(
        title={"text": title, "x": 0},
        template="none",
        margin={"l": 60, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.12},
        hovermode="x unified",
        uirevision=title,
    )
    fig.update_xaxes(
        showgrid=True,
        gridcolor="#e3e7ee",
        type="date",
        range=[_when(since), _when(engine_clock.now_ms())],
    )
    fig.update_yaxes(showgrid=True, gridcolor="#e3e7ee", rangemode="tozero")
    if empty:
        # In the middle of the first plot, not of the page: there, between two plots, it
        # covered the next plot's title.
        fig.add_annotation(
            text=empty_text,
            xref="paper",
            yref="y domain",
            x=0.5,
            y=0.5,
            showarrow=False,
        )
    return fig


# ----------------------------------------------------------------------------- figures


def dashboard_figure(range_name: str) -> go.Figure:
    """Produce and consume rates, and the total backlog, of the whole store."""
    range_s = RANGES[range_name]
    step = step_for(range_s)
    since = _since(range_s)
    rows = thin(
        StoreSample.objects.filter(ts_ms__gte=since).order_by("ts_ms"),
        step,
        envelope=STORE_ENVELOPE,
    )
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("Messages per second", "Backlog (messages)"),
    )
    for name, counter in (("Produce rate", "appended"), ("Consume rate", "consumed")):
        xs, ys = _rates(rows, counter)
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines"), row=1, col=1)
    fig.add_trace(
        go.Scatter(
            x=[_when(r.ts_ms) for r in rows],
            y=[r.backlog for r in rows],
            name="Backlog",
            mode="lines",
            fill="tozeroy",
        ),
        row=2,
        col=1,
    )
    if step > RES_RAW:
        fig.add_trace(_peak_trace([r.ts_ms for r in rows], [r.peak for r in rows]), row=2, col=1)
    return _layout(fig, "Store", not rows, since)


def _peak_trace(times: list[int], peaks: list) -> go.Scatter:
    """The most of each point's span: a peak between two drawn points stays visible."""
    return go.Scatter(
        x=[_when(ts) for ts in times],
        y=peaks,
        name="Most in each point's span",
        mode="lines",
        line={"dash": "dot", "shape": "hv"},
    )


def group_figure(group: str, range_name: str) -> go.Figure:
    """Lag per queue (stacked), lag in seconds, drain time and status over time."""
    range_s = RANGES[range_name]
    step = step_for(range_s)
    since = _since(range_s)
    rows = thin(
        GroupSample.objects.filter(group=group, ts_ms__gte=since).order_by("ts_ms"),
        step,
        lambda row: row.topic,
        envelope=GROUP_ENVELOPE,
        peak_of=_most_seconds,
    )
    topics = sorted({row.topic for row in rows})
    topic_rows = thin(
        TopicSample.objects.filter(topic__in=topics, ts_ms__gte=since).order_by("ts_ms"),
        step,
        lambda row: row.topic,
    )
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        row_heights=[0.4, 0.2, 0.2, 0.2],
        subplot_titles=(
            "Lag per queue (messages)",
            "Lag (seconds)",
            "Drain time (seconds; a gap: not draining)",
            "Status",
        ),
    )
    # Lag per queue, stacked.
    by_queue: dict[tuple[str, int], tuple[list, list]] = {}
    for row in rows:
        for queue, lag in enumerate(row.lags):
            # a big topic's row is the whole topic (queue -1: named without a queue)
            xs, ys = by_queue.setdefault((row.topic, -1 if row.aggregated else queue), ([], []))
            xs.append(_when(row.ts_ms))
            ys.append(lag)
    for (topic, queue), (xs, ys) in sorted(by_queue.items()):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=topic if queue < 0 else f"{topic}/{queue}",
                mode="lines",
                stackgroup="lag",
            ),
            row=1,
            col=1,
        )
    # Per sample time: the group over all its topics.
    times = sorted({row.ts_ms for row in rows})
    at: dict[int, list[GroupSample]] = {}
    for row in rows:
        at.setdefault(row.ts_ms, []).append(row)
    seconds = []
    statuses = []
    for ts in times:
        values = [s for row in at[ts] for s in row.lag_seconds if s is not None]
        lagging = sum(row.lag for row in at[ts])
        seconds.append(max(values) if values else (0.0 if lagging == 0 else None))
        statuses.append(max(GROUP_STATUSES.index(_group_level(row.worst)) for row in at[ts]))
    xs = [_when(ts) for ts in times]
    if step > RES_RAW:
        peaks = [sum(row.peak for row in at[ts]) for ts in times]
        fig.add_trace(_peak_trace(times, peaks), row=1, col=1)
    marks = _reset_marks(group, since)
    if marks is not None:
        fig.add_trace(marks, row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=seconds, name="Lag (s)", mode="lines"), row=2, col=1)
    if step > RES_RAW:
        most_seconds = [
            max((row.most for row in at[ts] if row.most is not None), default=None) for ts in times
        ]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=most_seconds,
                name="Most lag (s) in each point's span",
                mode="lines",
                line={"dash": "dot", "shape": "hv"},
            ),
            row=2,
            col=1,
        )
    drain_x, drain_y = _drain(times, at, topic_rows)
    fig.add_trace(
        go.Scatter(x=drain_x, y=drain_y, name="Drain time (s)", mode="lines", connectgaps=False),
        row=3,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=xs, y=statuses, name="Status", mode="lines", line={"shape": "hv"}),
        row=4,
        col=1,
    )
    fig.update_yaxes(
        row=4,
        col=1,
        tickmode="array",
        tickvals=list(range(len(GROUP_STATUSES))),
        ticktext=list(GROUP_STATUSES),
        range=[-0.2, len(GROUP_STATUSES) - 0.8],
    )
    return _layout(fig, f"Group {group}", not rows, since)


def _reset_marks(group: str, since_ms: int) -> go.Scatter | None:
    """The group's offset resets and undos since ``since_ms``, as marks on its lag chart:
    a move an operator made, not the consumer."""
    from console.groups.models import AppliedReset

    resets = list(
        AppliedReset.objects.filter(
            group=group, applied_at__gte=datetime.fromtimestamp(since_ms / 1000, UTC)
        ).order_by("applied_at")
    )
    if not resets:
        return None
    return go.Scatter(
        x=[reset.applied_at for reset in resets],
        y=[0] * len(resets),
        name="Resets",
        mode="markers+text",
        text=[f"reset #{reset.pk} ({reset.mode})" for reset in resets],
        textposition="top center",
        marker={"symbol": "triangle-up", "size": 12},
    )


def _drain(
    times: list[int], at: dict[int, list[GroupSample]], topic_rows: list[TopicSample]
) -> tuple[list[datetime], list[float | None]]:
    """Drain time (s) at each sample time after the first, at the rates over the rate
    window before it (or the previous point, when points are further apart): 0 caught up,
    None (a gap) not draining."""
    appended: dict[int, dict[str, TopicSample]] = {}
    for row in topic_rows:
        appended.setdefault(row.ts_ms, {})[row.topic] = row
    window = rate_window_ms()
    interval = settings.TIDEMARK_SAMPLE_INTERVAL_S
    xs, ys = [], []
    start = 0
    for index in range(1, len(times)):
        after_ts = times[index]
        while start < index - 1 and times[start] < after_ts - window:
            start += 1
        before_ts = times[start]
        before = {row.topic: row for row in at[before_ts]}
        consume = produce = 0.0
        for row in at[after_ts]:
            then = before.get(row.topic)
            if then is not None:
                consume += lagmath.rate(then.consumed, before_ts, row.consumed, after_ts)
            t_then = appended.get(before_ts, {}).get(row.topic)
            t_now = appended.get(after_ts, {}).get(row.topic)
            if t_then is not None and t_now is not None:
                produce += lagmath.rate(t_then.appended, before_ts, t_now.appended, after_ts)
        lag = sum(row.lag for row in at[after_ts])
        xs.append(_when(after_ts))
        ys.append(lagmath.drain(lag, consume, produce, interval).seconds)
    return xs, ys


def topic_figure(topic: str, range_name: str) -> go.Figure:
    """The topic's append rate and size (messages held)."""
    range_s = RANGES[range_name]
    since = _since(range_s)
    rows = thin(
        TopicSample.objects.filter(topic=topic, ts_ms__gte=since).order_by("ts_ms"),
        step_for(range_s),
    )
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("Messages appended per second", "Size (messages)"),
    )
    xs, ys = _rates(rows, "appended")
    fig.add_trace(go.Scatter(x=xs, y=ys, name="Append rate", mode="lines"), row=1, col=1)
    fig.add_trace(
        go.Scatter(
            x=[_when(r.ts_ms) for r in rows],
            y=[r.messages for r in rows],
            name="Size",
            mode="lines",
            fill="tozeroy",
        ),
        row=2,
        col=1,
    )
    return _layout(fig, f"Topic {topic}", not rows, since)


def history_step(range_s: int) -> int:
    """The bucket (1 min, 1 h, 1 d) that draws ``range_s`` of statistics in at most
    MAX_POINTS points."""
    for step in (60, HOUR_S, DAY_S):
        if range_s / step <= MAX_POINTS:
            return step
    return DAY_S


def topic_history_figure(topic: str, range_name: str) -> go.Figure:
    """Messages and bytes per minute of the topic, from the Spark statistics job's rows."""
    range_s = HISTORY_RANGES[range_name]
    since = _since(range_s)
    step_ms = history_step(range_s) * 1000
    minutes = step_ms / 60_000
    buckets: dict[int, list[int]] = {}
    for minute_ms, messages, size in (
        TopicMinuteStats.objects.filter(topic=topic, minute_ms__gte=since)
        .order_by("minute_ms")
        .values_list("minute_ms", "messages", "bytes")
    ):
        totals = buckets.setdefault(minute_ms // step_ms * step_ms, [0, 0])
        totals[0] += messages
        totals[1] += size
    xs = [_when(start) for start in buckets]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("Messages per minute", "Bytes per minute"),
    )
    for row, (name, index) in enumerate(
        (("Messages per minute", 0), ("Bytes per minute", 1)), start=1
    ):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[round(totals[index] / minutes, 3) for totals in buckets.values()],
                name=name,
                mode="lines",
            ),
            row=row,
            col=1,
        )
    return _layout(
        fig,
        f"Topic {topic}: statistics",
        not buckets,
        since,
        "No statistics in this range yet (the topic statistics job writes them hourly).",
    )


def storage_figure(range_name: str) -> go.Figure:
    """Disk use (% of the disk) against the warn, force and reject thresholds."""
    range_s = RANGES[range_name]
    since = _since(range_s)
    rows = thin(StoreSample.objects.filter(ts_ms__gte=since).order_by("ts_ms"), step_for(range_s))
    config = store_config()
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[_when(r.ts_ms) for r in rows],
            y=[round(r.disk_ratio * 100, 2) for r in rows],
            name="Disk use",
            mode="lines",
            fill="tozeroy",
        )
    )
    span = [_when(since), _when(since + range_s * 1000)]
    for name, ratio, colour in (
        ("Warn threshold", config.disk_warn_ratio, "#b7791f"),
        ("Force threshold", config.disk_force_ratio, "#c05621"),
        ("Reject threshold", config.disk_reject_ratio, "#c53030"),
    ):
        fig.add_trace(
            go.Scatter(
                x=span,
                y=[round(ratio * 100, 2)] * 2,
                name=name,
                mode="lines",
                line={"dash": "dash", "color": colour},
                hoverinfo="name+y",
            )
        )
    fig.update_yaxes(title_text="% of the disk", range=[0, 100])
    return _layout(fig, "Disk use", not rows, since)
