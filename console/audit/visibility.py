"""What of the audit log a user in scoped roles sees (console/accounts/permissions.py).

A user whose rules cover every topic and every group (the built-in roles) sees every row.
Any other user sees the rows whose target starts with a topic or group they may view
("topic <name>…", "group <name>…", a group's own "%RETRY%"/"%DLQ%" topics by the group),
and the rows of their own actions; rows about other teams' topics, groups, users and
settings are left out.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Q, QuerySet

from console.accounts.permissions import GROUP, TOPIC, VIEW, permissions_of
from console.core.store import get_store


def visible_entries(user: Any, entries: QuerySet) -> QuerySet:
    permissions = permissions_of(user)
    if permissions.unscoped(TOPIC) and permissions.unscoped(GROUP):
        return entries
    store = get_store()
    topics = [i.name for i in store.topics() if permissions.allows(TOPIC, i.name, VIEW)]
    groups = [name for name in store.groups() if permissions.allows(GROUP, name, VIEW)]
    mine = Q(user_id=user.pk)
    alternatives = [
        f"{kind} ({'|'.join(re.escape(name) for name in names)})"
        for kind, names in (("topic", topics), ("group", groups))
        if names
    ]
    if not alternatives:
        return entries.filter(mine)
    # "topic orders", "topic orders queue 0", "group billing topic orders", …
    pattern = f"^({'|'.join(alternatives)})( |$)"
    return entries.filter(Q(target__regex=pattern) | mine)
