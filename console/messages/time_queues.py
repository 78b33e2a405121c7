"""Which queues a search by time reads: the one rule for the search page and the API.

A search by time reads every queue it covers, so its work grows with the queues. A topic of
at most TIDEMARK_BIG_TOPIC_QUEUES queues is searched whole; a bigger one only over a queue
range (first and last queue, both included) at most that wide.
"""

from __future__ import annotations

from django.conf import settings


class TimeSearchTooWide(ValueError):
    """A search by time over more queues than one search reads; the message says why."""


def widest() -> int:
    """The most queues one search by time reads."""
    return max(1, int(settings.TIDEMARK_BIG_TOPIC_QUEUES))


def time_queues(topic: str, queue_count: int, first: int | None, last: int | None) -> range:
    """The queues of `topic` (of `queue_count`) a search by time from queue `first` to
    `last` (both included, either may be None) reads; TimeSearchTooWide when it may not."""
    most = widest()
    if first is None and last is None:
        if queue_count > most:
            raise TimeSearchTooWide(
                f"Topic {topic} has {queue_count:,} queues: a search by time reads "
                f"{most:,} queues at most, so give a first and last queue "
                f"(at most {most:,} queues apart)."
            )
        return range(queue_count)
    start = 0 if first is None else first
    end = queue_count - 1 if last is None else last
    if start > end:
        raise TimeSearchTooWide(f"The last queue ({end:,}) is before the first ({start:,}).")
    if start >= queue_count:
        raise TimeSearchTooWide(
            f"Topic {topic} has {queue_count:,} queues (0 to {queue_count - 1:,}): "
            f"it has no queue {start:,}."
        )
    end = min(end, queue_count - 1)
    if end - start + 1 > most:
        raise TimeSearchTooWide(
            f"A search by time reads {most:,} queues at most; queues {start:,} to {end:,} "
            f"are {end - start + 1:,}: narrow the range."
        )
    return range(start, end + 1)
