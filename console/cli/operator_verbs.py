"""``tidemark groups``, ``lag``, ``reset-offsets`` and ``redrive-dlq``: the console's group
services on the command line, in the words of Kafka's ``kafka-consumer-groups``.

Each sets Django up (the console's settings, its database for the Resets list and the
audit log) and opens the store at ``TIDEMARK_STORE_DIR`` (``--dir``). Changes are recorded
as made by ``cli:<name>`` (``--as``, default: the login name), or by the console user of
that name when there is one. A reset is previewed unless ``--execute`` is given.

Acting as a console user, a command obeys that user's roles (console/accounts/
permissions.py): ``groups`` lists the groups they may view, ``lag`` needs view on the
group, ``reset-offsets`` reset, ``redrive-dlq`` redrive; a refusal exits 4 with a sentence.
``cli:<name>`` (no console user of that name) is whoever runs the command on the store's
machine, who can open the store's files anyway: no rule applies.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from storeadapter.engine import EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE_ERROR, StoreError, is_store
from storeadapter.reset_modes import RESET_MODES, ResetMode

#: A console user's roles refuse the command.
EXIT_NOT_ALLOWED = 4


def _django() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    # A command's own output is what it prints; the store's reports only when they warn.
    os.environ.setdefault("TIDEMARK_LOG_LEVEL", "WARNING")
    django.setup()


class CliActor:
    """Who made a change from the command line, as the audit log records it."""

    is_authenticated = True
    pk = None

    def __init__(self, name: str) -> None:
        self.name = name

    def get_username(self) -> str:
        return f"cli:{self.name}"


def actor(name: str | None) -> Any:
    from django.contrib.auth import get_user_model

    name = name or os.environ.get("TIDEMARK_CLI_USER") or getpass.getuser()
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    return user or CliActor(name)


class NotAllowed(Exception):
    """The console user the command acts as may not do this (a sentence)."""


def _allows(who: Any, kind: str, name: str, action: str) -> bool:
    """Whether ``who`` may ``action`` the topic or group ``name``: a console user by their
    roles' rules (console/accounts/permissions.py); ``cli:<name>``, who is no console user,
    by the machine (whoever runs this can open the store's files anyway)."""
    if isinstance(who, CliActor):
        return True
    from console.accounts.permissions import permissions_of

    return permissions_of(who).allows(kind, name, action)


def _require(who: Any, kind: str, name: str, action: str) -> None:
    if not _allows(who, kind, name, action):
        raise NotAllowed(
            f"{who.get_username()}'s roles do not allow them to {action} the {kind} {name!r}"
        )


def _store_or_refuse():
    from django.conf import settings

    path = settings.TIDEMARK_STORE_DIR
    if not is_store(path):
        raise StoreError(
            f"{path} is not a Tidemark store: it holds no commit log; check --dir or "
            "TIDEMARK_STORE_DIR"
        )
    from console.core.store import get_store

    return get_store()


def _table(rows: list[list[Any]], header: list[str]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


# -------------------------------------------------------------------------------- groups


def _groups(args: argparse.Namespace) -> int:
    from console.api.read_models import GroupSerializer
    from console.groups.detail import group_rows
    from storeadapter.summaries import group_summaries

    store = _store_or_refuse()
    who = actor(args.as_user)
    summaries = [
        summary
        for summary in group_summaries(store, with_queues=False)
        if _allows(who, "group", summary.group, "view")
    ]
    rows = group_rows(store, summaries)
    if args.json:
        print(json.dumps(GroupSerializer(rows, many=True).data))
    else:
        _table(
            [[r.group, ",".join(r.topic_names), r.lag, r.members] for r in rows],
            ["GROUP", "TOPICS", "LAG", "MEMBERS"],
        )
    return EXIT_OK


def _lag(args: argparse.Namespace) -> int:
    from console.api.read_models import QueueLagSerializer
    from storeadapter.summaries import group_summary

    store = _store_or_refuse()
    if args.group not in store.groups():
        raise StoreError(f"there is no consumer group named {args.group!r}")
    _require(actor(args.as_user), "group", args.group, "view")
    summary = group_summary(store, args.group)
    rows = [q for q in summary.queues if args.topic is None or q.topic == args.topic]
    if args.json:
        print(json.dumps(QueueLagSerializer(rows, many=True).data))
        return EXIT_OK
    _table(
        [
            [q.topic, q.queue, "-" if q.committed is None else q.committed, q.max_offset, q.lag]
            for q in rows
        ],
        ["TOPIC", "QUEUE", "COMMITTED", "END", "LAG"],
    )
    return EXIT_OK


# ------------------------------------------------------------------------- reset-offsets


def _parse_time(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise StoreError(f"--to-datetime {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _parse_offsets(text: str) -> dict[int, int]:
    from django import forms

    from console.groups.forms import parse_queue_offsets

    try:
        return parse_queue_offsets(text.replace(",", "\n"))
    except forms.ValidationError as error:
        raise StoreError("; ".join(error.messages)) from None


#: How a flag's text becomes the value of each kind a mode takes (a shift's flag is read
#: as a whole number by argparse itself).
_FLAG_VALUES: dict[str, Callable[[Any], Any]] = {
    "nothing": lambda given: None,
    "offsets": _parse_offsets,
    "time": _parse_time,
    "shift": int,
    "group": str,
}


def _flag_dest(mode: ResetMode) -> str:
    return mode.cli_flag.lstrip("-").replace("-", "_")


def _add_mode_flags(to: argparse._MutuallyExclusiveGroup) -> None:
    """One flag per reset mode, as the modes' table names them."""
    for mode in RESET_MODES:
        if mode.takes == "nothing":
            to.add_argument(mode.cli_flag, action="store_true", help=mode.cli_help)
        else:
            to.add_argument(
                mode.cli_flag,
                type=int if mode.takes == "shift" else str,
                metavar=mode.cli_metavar,
                help=mode.cli_help,
            )


def _mode(args: argparse.Namespace) -> tuple[str, Any]:
    """The mode whose flag was given, and its value."""
    for mode in RESET_MODES:
        given = getattr(args, _flag_dest(mode))
        if given is not None and given is not False:
            return mode.name, _FLAG_VALUES[mode.takes](given)
    raise StoreError(f"choose a reset: one of {', '.join(m.cli_flag for m in RESET_MODES)}")


def _reset(args: argparse.Namespace) -> int:
    from console.groups.resets import keep_preview
    from console.operations import groups as operations
    from storeadapter.offset_reset import preview_reset

    store = _store_or_refuse()
    _require(actor(args.as_user), "group", args.group, "reset")
    mode, value = _mode(args)
    plan = preview_reset(store, args.group, args.topic, mode, value)
    rows = [
        [q.queue, q.current, q.target, q.consumed_again, q.skipped, q.clamped or ""]
        for q in plan.changes
    ]
    if not args.execute:
        if args.json:
            from console.api.read_models import PlanViewSerializer

            print(json.dumps({"dry_run": True, **PlanViewSerializer(plan.view()).data}))
            return EXIT_OK
        _table(rows, ["QUEUE", "CURRENT", "TARGET", "CONSUMED-AGAIN", "SKIPPED", "CLAMPED"])
        print(
            f"dry run: {plan.moved:,} queue(s) of {plan.queue_count:,} would move; "
            f"{plan.consumed_again:,} message(s) consumed again, {plan.skipped:,} skipped. "
            "Add --execute to apply it.",
            file=sys.stderr,
        )
        return EXIT_OK
    kept = keep_preview(plan)
    applied = operations.apply_kept_preview(actor(args.as_user), args.group, kept.token)
    if applied.reset is None:
        print("every queue was already where the reset puts it; nothing changed", file=sys.stderr)
        return EXIT_OK
    if args.json:
        from console.api.read_models import ResetAppliedSerializer

        print(json.dumps(ResetAppliedSerializer(applied.view()).data))
    else:
        changes = [[c.queue, c.old, c.new] for c in applied.changes]
        _table(changes, ["QUEUE", "OLD", "NEW"])
        print(
            f"applied reset #{applied.reset.pk}: {applied.reset.moved:,} queue(s) moved; undo "
            f"it in the console at /groups/{args.group}/resets/",
            file=sys.stderr,
        )
    return EXIT_OK


# --------------------------------------------------------------------------- redrive-dlq


def _redrive(args: argparse.Namespace) -> int:
    from console.operations import groups as operations

    _store_or_refuse()
    _require(actor(args.as_user), "group", args.group, "redrive")
    ids = None if args.all else args.ids
    outcome = operations.redrive(actor(args.as_user), args.group, ids)
    print(operations.redrive_sentence(outcome))
    return EXIT_OK


# ------------------------------------------------------------------------------- wiring


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from storeadapter.access import close_all

        _django()
        try:
            return handler(args)
        except StoreError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_STORE_ERROR
        except NotAllowed as error:
            print(f"error: {error}; nothing was done", file=sys.stderr)
            return EXIT_NOT_ALLOWED
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            close_all()  # a clean close: the next opening finds no crash to recover

    return run


def add_commands(commands: argparse._SubParsersAction) -> dict[str, Callable]:
    groups = commands.add_parser("groups", help="consumer groups: topics, lag, live members")
    groups.add_argument("--json", action="store_true")
    groups.add_argument("--as", dest="as_user", help="the console user whose roles apply")

    lag = commands.add_parser("lag", help="a group's lag per queue (live)")
    lag.add_argument("--group", required=True)
    lag.add_argument("--topic")
    lag.add_argument("--json", action="store_true")
    lag.add_argument("--as", dest="as_user", help="the console user whose roles apply")

    reset = commands.add_parser(
        "reset-offsets",
        help="preview (--dry-run, the default) or apply (--execute) an offset reset",
        description="Move a group's committed offsets on one topic. Without --execute it "
        "prints what each queue would do and changes nothing, as kafka-consumer-groups "
        "does. An applied reset is listed on the group's Resets page and can be undone.",
    )
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    _add_mode_flags(to)
    apply = reset.add_mutually_exclusive_group()
    apply.add_argument("--dry-run", action="store_true", help="preview only (the default)")
    apply.add_argument("--execute", action="store_true", help="apply the reset")
    reset.add_argument("--as", dest="as_user", help="who the audit log names")
    reset.add_argument("--json", action="store_true")

    redrive = commands.add_parser("redrive-dlq", help="send a group's dead letters back")
    redrive.add_argument("--group", required=True)
    which = redrive.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true")
    which.add_argument("--id", dest="ids", action="append", metavar="MESSAGE_ID")
    redrive.add_argument("--as", dest="as_user", help="who the audit log names")
    return {
        "groups": _guarded(_groups),
        "lag": _guarded(_lag),
        "reset-offsets": _guarded(_reset),
        "redrive-dlq": _guarded(_redrive),
    }
