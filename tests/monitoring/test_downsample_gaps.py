"""Downsampling reads and writes the chunks of time that hold points, not every chunk
between the oldest point and the cut-off: a series with a month's gap (a group sampled
once, a console stopped for weeks) costs a few statements, not thousands."""

from __future__ import annotations

import pytest

from console.monitoring.downsample import downsample
from console.monitoring.models import StoreSample
from tests.monitoring.test_downsample import DAY, HOUR, NOW, group_row, store_row, topic_row

pytestmark = pytest.mark.django_db


def test_a_month_old_point_and_a_recent_one_are_thinned_in_a_few_statements(
    django_assert_max_num_queries,
):
    for ts in (NOW - 30 * DAY, NOW - 30 * DAY + 10_000, NOW - 7 * HOUR, NOW - 7 * HOUR + 10_000):
        store_row(ts)
        topic_row(ts)
        group_row(ts)

    # Two tiers × three series, each with its two chunks of points: a gap of a month
    # walked chunk by chunk is 4,000+ chunks of 10 minutes.
    with django_assert_max_num_queries(150):
        report = downsample(NOW)

    assert report.thinned == 6  # of each pair, the last point of its minute stays
    assert sorted(StoreSample.objects.values_list("ts_ms", "resolution")) == [
        (NOW - 30 * DAY + 10_000, 3600),
        (NOW - 7 * HOUR + 10_000, 60),
    ]


def test_points_on_both_sides_of_a_gap_keep_their_own_buckets():
    early = [NOW - 20 * DAY + i * 10_000 for i in range(12)]  # two minutes
    late = [NOW - 8 * HOUR + i * 10_000 for i in range(12)]
    for ts in early + late:
        store_row(ts, backlog=ts % 7)

    downsample(NOW)

    rows = list(StoreSample.objects.order_by("ts_ms").values_list("ts_ms", "resolution"))
    assert rows == [(early[-1], 3600), (late[5], 60), (late[-1], 60)]
