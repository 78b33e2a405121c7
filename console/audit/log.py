"""Write audit rows. Every change made in the console or through the API calls `record`.

    from console.audit.log import record

    record(
        request.user,
        "topic.create",
        "topic orders",
        after={"queues": 8},
    )

Call it in the same transaction as the change when the change is in the database, so the
two are kept or lost together.
"""

from __future__ import annotations

from typing import Any

from console.audit.models import AuditEntry

ACTION_MAX_LENGTH = AuditEntry._meta.get_field("action").max_length
LINK_MAX_LENGTH = AuditEntry._meta.get_field("link").max_length


def record(
    user: Any,
    action: str,
    target: str,
    before: Any = None,
    after: Any = None,
    detail: str = "",
    link: str = "",
) -> AuditEntry:
    """Save and return one audit row.

    `user` is the user who made the change (None or anonymous for the system itself; the
    username is kept even if the user is deleted later). `action` is a short slug like
    "topic.create", `target` what was changed ("topic orders"). `before` and `after` are
    JSON-serialisable values (dicts of the changed fields, usually; datetimes and decimals
    are turned into strings). `link` is a path in the console ("/groups/g/resets/3/") or an
    http(s) URL.
    """
    action = (action or "").strip()
    if not action:
        raise ValueError("an audit action is required, such as 'topic.create'")
    if len(action) > ACTION_MAX_LENGTH:
        raise ValueError(f"audit action {action!r} is longer than {ACTION_MAX_LENGTH} characters")
    link = (link or "").strip()
    if link and not link.startswith(("/", "http://", "https://")):
        raise ValueError(f"audit link {link!r} must be a path starting with / or an http(s) URL")
    if len(link) > LINK_MAX_LENGTH:
        raise ValueError(f"audit link is longer than {LINK_MAX_LENGTH} characters")

    if user is not None and user.is_authenticated:
        user_id, username = user.pk, user.get_username()
    else:
        user_id, username = None, ""
    return AuditEntry.objects.create(
        user_id=user_id,
        username=username,
        action=action,
        target=str(target),
        before=before,
        after=after,
        detail=detail or "",
        link=link,
    )
