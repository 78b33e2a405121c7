"""Naming rules for topics and consumer groups.

A name is letters, digits, ``.``, ``_`` and ``-``, 1 to 127 characters, and
never ``.`` or ``..``: names become directory names, so nothing else may pass.
A group's retry and dead-letter topics are the exception: ``%RETRY%<group>`` and
``%DLQ%<group>`` (as in RocketMQ), where ``<group>`` follows the rule; only consumers
create those, and ``check_new_topic_name`` refuses them to people.
"""

from __future__ import annotations

import re

from .errors import InvalidMessageError, InvalidNameError

MAX_NAME_LENGTH = 127
_NAME = re.compile(r"[A-Za-z0-9._-]{1,127}")


RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    """The topic a group's failed messages wait in before they are tried again."""
    return RETRY_PREFIX + check_name(group, "group")


def dlq_topic(group: str) -> str:
    """The topic a group's messages go to after their last failed try."""
    return DLQ_PREFIX + check_name(group, "group")


def check_name(name: object, what: str = "topic") -> str:
    """Return ``name`` if it is a valid topic or group name, else raise InvalidNameError."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a string, not {type(name).__name__}")
    if what == "topic":
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            group = name[len(prefix) :]
            if name.startswith(prefix) and _NAME.fullmatch(group) and group not in (".", ".."):
                return name
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidNameError(
            f"{what} name {_shown(name)!r} is not valid: use 1 to {MAX_NAME_LENGTH} letters, "
            "digits, '.', '_' or '-' (and not '.' or '..')"
        )
    return name


def check_new_topic_name(name: object) -> str:
    """Return ``name`` if a person may create a topic of that name, else raise
    InvalidNameError with a sentence: ``check_name``'s rule, without the exception it
    makes for a group's ``%RETRY%``/``%DLQ%`` topics, which only its consumers create.
    The console's topic form, the API and the command line all ask this."""
    if isinstance(name, str):
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            if name.startswith(prefix):
                kind = "retry" if prefix == RETRY_PREFIX else "dead-letter"
                raise InvalidNameError(
                    f"topic name {_shown(name)!r} is reserved for a consumer group's {kind} "
                    f"topic ({prefix}<group>), which its consumers create; use 1 to "
                    f"{MAX_NAME_LENGTH} letters, digits, '.', '_' or '-'"
                )
        if len(name) > MAX_NAME_LENGTH:
            raise InvalidNameError(
                f"topic name is {len(name):,} characters long: use at most {MAX_NAME_LENGTH}"
                " letters, digits, '.', '_' or '-'"
            )
    return check_name(name, "topic")


def _shown(name: str) -> str:
    return name if len(name) <= 40 else name[:40] + "…"


DEDUP_PROPERTY = "DEDUP_ID"
# Dedup ids are indexed as keys under this prefix; user keys cannot contain \x01.
DEDUP_KEY_PREFIX = "\x01dedup\x01"
MAX_DEDUP_ID_LENGTH = 256


def check_dedup_id(dedup_id: object) -> str:
    """Return a producer's dedup id if usable, else raise InvalidMessageError."""
    if (
        not isinstance(dedup_id, str)
        or not 0 < len(dedup_id) <= MAX_DEDUP_ID_LENGTH
        or any(c in dedup_id for c in "\x01\x02\x1f")
    ):
        raise InvalidMessageError(
            f"a dedup id is 1 to {MAX_DEDUP_ID_LENGTH} characters of text without "
            "control separators"
        )
    return dedup_id
