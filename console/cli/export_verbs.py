"""``tidemark filter TOPIC EXPRESSION --jsonl``: the filter's results as JSON Lines, the
lines of the API's filter export (``console.messages.exports.filter_export``: one owner
for the line shape and the trailer), for scripts and files.

Without ``--jsonl`` the engine's ``filter`` runs as before (a bounded scan printed as text,
JSON or hex). With it: every match from ``--cursor`` (the start when not given) over the
``--queue``\\ s (every queue when none), bounded as an export is: ``--max`` messages
(default 10,000) and ``--max-seconds`` of reading (default 30). The last line is the
export's trailer, ``{"export": {"complete", "messages", "stopped_by", "next",
"continue"}}``; ``continue`` is the command line that writes the rest. Exit codes as the
engine's filter: 0 written (complete or stopped by the budget), 2 an expression that does
not compile (its position on stderr) or flags that do not go together, 3 no such store,
topic or queue, or a bad cursor.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.cli.operator_verbs import _guarded, _store_or_refuse
from storeadapter.engine import EXIT_OK, EXIT_USAGE

#: The printed scan's flags, which a JSON Lines export does not take.
PRINTED_SCAN_ONLY = ("max_records", "format")


class CommandContinuation:
    """The trailer's ``continue`` of a command-line export: the ``tidemark filter`` command
    line (shell-quoted) that writes the rest; ``next`` as the API's (``{"cursor": …}``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def next(self, after: dict[str, Any]) -> dict[str, Any]:
        return dict(after)

    def url(self, after: dict[str, Any]) -> str:
        args = self.args
        words = ["tidemark", "--dir", str(Path(args.dir).resolve()), "filter"]
        words += [args.topic, args.expression, "--jsonl"]
        for queue in args.queue or ():
            words += ["--queue", str(queue)]
        if args.max is not None:
            words += ["--max", str(args.max)]
        if args.max_seconds is not None:
            words += ["--max-seconds", f"{args.max_seconds:g}"]
        words += ["--cursor", after["cursor"]]
        return shlex.join(words)


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the flags do not make a JSON Lines export (a sentence), or None."""
    from console.messages import exports

    given = [
        f"--{name.replace('_', '-')}"
        for name in PRINTED_SCAN_ONLY
        if getattr(args, name) is not None
    ]
    if given:
        return (
            f"{' and '.join(given)} belong to the printed scan; --jsonl exports with --max "
            "(messages) and --max-seconds"
        )
    if args.max is not None and not 1 <= args.max <= exports.MAX_RECORDS:
        return f"--max is 1 to {exports.MAX_RECORDS:,} messages with --jsonl, not {args.max}"
    if args.max_seconds is not None and not 0 < args.max_seconds <= exports.MAX_SECONDS:
        return f"--max-seconds is above 0 and at most {exports.MAX_SECONDS} with --jsonl"
    return None


def _filter_jsonl(args: argparse.Namespace) -> int:
    from console.messages import exports
    from storeadapter.engine import filters

    refused = _refusal(args)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_USAGE
    store = _store_or_refuse()
    budget = exports.Budget(
        args.max or exports.DEFAULT_RECORDS, args.max_seconds or exports.DEFAULT_SECONDS
    )
    queues = sorted(set(args.queue)) if args.queue else None
    then: Any = CommandContinuation(args)
    try:
        lines = exports.filter_export(
            store, args.topic, args.expression, queues, args.cursor, budget, then
        )
    except filters.FilterSyntaxError as error:
        line = args.expression.split("\n")[error.line - 1] if args.expression else ""
        print(f"error: the expression does not compile: {error}", file=sys.stderr)
        print(f"  {line}\n  {' ' * (error.column - 1)}^", file=sys.stderr)
        return EXIT_USAGE
    out = sys.stdout
    try:
        for chunk in lines:
            out.write(chunk.decode("utf-8"))
        out.flush()
    except BrokenPipeError:
        pass  # the reader stopped early (| head): what it read is whole lines
    return EXIT_OK


def _engine_or_jsonl(args: argparse.Namespace) -> bool:
    return bool(args.jsonl)


def add_commands(commands: argparse._SubParsersAction) -> dict[str, Callable]:
    """``--jsonl`` on the engine's ``filter``; its handler, which takes only ``--jsonl``
    runs (``handles``): the others go to the engine's filter."""
    filtering = commands.choices["filter"]
    filtering.add_argument(
        "--jsonl",
        action="store_true",
        help="write every match as JSON Lines (the API's filter export), at most --max "
        "messages (default 10,000) and --max-seconds (default 30); the last line says how "
        "far it got and the command that continues it",
    )
    # The printed scan's defaults are the engine's (its own parser): here, None says
    # which flags were given.
    filtering.set_defaults(max=None, max_seconds=None, max_records=None, format=None)
    handler = _guarded(_filter_jsonl)
    handler.handles = _engine_or_jsonl  # type: ignore[attr-defined]
    return {"filter": handler}
