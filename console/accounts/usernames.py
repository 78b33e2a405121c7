"""One rule for user names: two names are the same name when their NFKC casefolds are equal.

"ＡＤＭＩＮ" (full-width), "𝐚𝐝𝐦𝐢𝐧" (mathematical bold) and "Admin" are all "admin"; "STRASSE"
is "straße". Names are stored in their NFKC form (Django's ``normalize_username``); every
place that creates or renames a user asks `same_name_holder` first, a login finds its user
through `stored_name`, and the lockout counters key a name by `canonical`. The database
backs this with a unique index on ``lower(username)`` (migration 0004), which catches the
case twins two concurrent creations could still make.
"""

from __future__ import annotations

import unicodedata

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError


def canonical(name: str) -> str:
    """The form two names are compared in: NFKC, casefolded, NFKC again (Unicode's
    NFKC_Casefold, as far as Python's standard library gets)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def _names(exclude_pk: object = None):
    model = get_user_model()
    users = model._default_manager.all()
    if exclude_pk is not None:
        users = users.exclude(pk=exclude_pk)
    return users.values_list(model.USERNAME_FIELD, flat=True)


def same_name_holder(name: str, exclude_pk: object = None) -> str | None:
    """The stored name of the user whose name is the same as ``name`` (other than the user
    ``exclude_pk``, when renaming one), or None.

    Every stored name is compared: case folding is not something SQLite or every
    PostgreSQL collation can do, and a console has hundreds of users, not millions."""
    wanted = canonical(name)
    return next((stored for stored in _names(exclude_pk) if canonical(stored) == wanted), None)


def stored_name(name: str) -> str | None:
    """The stored name a login typed as ``name`` is for, or None when there is no such user."""
    model = get_user_model()
    field = model.USERNAME_FIELD
    nfkc = unicodedata.normalize("NFKC", name)
    exact = model._default_manager.filter(**{f"{field}__iexact": nfkc})
    for stored in exact.values_list(field, flat=True):
        if canonical(stored) == canonical(name):
            return stored
    return same_name_holder(name)


def duplicate_error(name: str, exclude_pk: object = None) -> ValidationError | None:
    """The form error for a name some other user already has (in any spelling), or None."""
    holder = same_name_holder(name, exclude_pk)
    if holder is None:
        return None
    if holder == name:
        return ValidationError(f"A user named {holder} already exists.", code="duplicate")
    return ValidationError(
        f"A user named {holder} already exists ({name} is the same name).", code="duplicate"
    )


def validate_unique_name(name: str, exclude_pk: object = None) -> None:
    """Raise the `duplicate_error` for ``name``, if any."""
    error = duplicate_error(name, exclude_pk)
    if error is not None:
        raise error
