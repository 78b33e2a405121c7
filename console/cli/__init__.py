"""The ``tidemark`` command: the engine's subcommands, and operator verbs over the store.

Engine subcommands (``create-topic``, ``produce``, ``consume``, ``stat``, ``verify``, …)
run as ``python -m storeadapter.engine`` runs them, without Django. The operator verbs
(``groups``, ``lag``, ``reset-offsets``, ``redrive-dlq``, ``topic-settings``, ``filter
--jsonl``) go through
the console's own services, so a reset made here is in the group's Resets list
(undoable) and in the audit log; ``serve`` starts gunicorn, ``manage`` runs a Django
management command (``migrate``, ``collectstatic``, ``createsuperuser``). ``.env`` is
read first, as the console reads it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from console.cli import export_verbs, operator_verbs, serving, topic_verbs
from console.env import load_env_file, project_dir
from storeadapter.engine import cli as engine_cli

PROG = "tidemark"


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    """The engine's parser with the operator verbs added; and the verbs' handlers."""
    parser = engine_cli.build_parser(PROG)
    parser.description = (
        "Operate a Tidemark store and its console: the engine's commands, consumer-group "
        "verbs, the web server and Django's management commands."
    )
    commands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    handlers = {}
    handlers.update(operator_verbs.add_commands(commands))
    handlers.update(topic_verbs.add_commands(commands))
    handlers.update(serving.add_commands(commands))
    handlers.update(export_verbs.add_commands(commands))
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    load_env_file(project_dir(Path(__file__).resolve().parents[2]))
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    handler = handlers.get(args.command)
    # A handler that says it does not handle these arguments leaves them to the engine
    # (``filter`` without --jsonl).
    if handler is None or not getattr(handler, "handles", lambda _args: True)(args):
        return engine_cli.main(argv, prog=PROG)
    if "--dir" in argv or any(arg.startswith("--dir=") for arg in argv):
        os.environ["TIDEMARK_STORE_DIR"] = str(Path(args.dir).resolve())
    from django.core.exceptions import ImproperlyConfigured

    try:
        return handler(args)
    except ImproperlyConfigured as error:
        # A setting from the environment is missing or wrong: the sentence says which.
        print(f"tidemark cannot start: {error}", file=sys.stderr)
        return engine_cli.EXIT_USAGE
