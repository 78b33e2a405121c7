"""What of the last retention report a user in scoped roles sees (console/accounts/
permissions.py): the queues of the topics they may view, each with the unconsumed counts of
the groups they may view. The segments and bytes it deleted are the store's own and stay."""

from __future__ import annotations

from typing import Any

from console.accounts.permissions import GROUP, TOPIC, viewable


def visible_retention(user: Any, report: dict | None) -> dict | None:
    topics, groups = viewable(user, TOPIC), viewable(user, GROUP)
    if report is None or (topics is None and groups is None):
        return report
    queues = []
    for row in report.get("queues", []):
        if topics is not None and not topics(str(row.get("topic", ""))):
            continue
        unconsumed = row.get("unconsumed_by_group", {})
        if groups is not None:
            unconsumed = {group: n for group, n in unconsumed.items() if groups(group)}
        queues.append({**row, "unconsumed_by_group": unconsumed})
    return {**report, "queues": queues}
