"""``{% utc_time %}`` and ``{% ms_time %}`` (console/topics/templatetags/topic_tags.py): the
console's one time format, the same for every moment a store or a row can hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from console.topics.templatetags.topic_tags import ms_time, utc_time

MOMENTS = [
    datetime(2026, 5, 1, 12, 34, 56, 789_999, tzinfo=UTC),
    datetime(2026, 5, 1, 12, 34, 56, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(999, 3, 4, 5, 6, 7, 8_000, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(2026, 5, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5))),
    datetime(2026, 5, 1, 12, 34, 56, 1_000),  # naive: shown as it is
]


def strftime_answer(when: datetime) -> str:
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    iso = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f'<time datetime="{iso}">{when.strftime("%Y-%m-%d %H:%M:%S UTC")}</time>'


@pytest.mark.parametrize("when", MOMENTS, ids=str)
def test_utc_time_writes_the_iso_time_and_the_shown_time(when):
    assert utc_time(when) == strftime_answer(when)


def test_ms_time_is_the_utc_time_of_its_milliseconds():
    assert ms_time(1_777_638_896_789) == (
        '<time datetime="2026-05-01T12:34:56.789Z">2026-05-01 12:34:56 UTC</time>'
    )


def test_ms_time_of_nothing_or_of_no_moment_is_the_empty_text():
    assert ms_time(None, "never") == "never"
    assert ms_time(10**20) == "—"
