"""``tidemark serve`` (gunicorn with the console's settings) and ``tidemark manage``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

#: gunicorn's worker class: threads share one open store per process.
WORKER_CLASS = "gthread"


def gunicorn_argv(bind: str, workers: int, threads: int, timeout: int) -> list[str]:
    """The command line ``serve`` runs."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "console.wsgi:application",
        "--worker-class",
        WORKER_CLASS,
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--bind",
        bind,
        "--timeout",
        str(timeout),
        # Access lines and gunicorn's own errors on stderr, beside the console's LOGGING.
        "--access-logfile",
        "-",
        "--error-logfile",
        "-",
        # Long polls (the API's wait, up to 30 s) hold a thread, not a worker.
        "--graceful-timeout",
        "30",
    ]


def _serve(args: argparse.Namespace) -> int:
    argv = gunicorn_argv(args.bind, args.workers, args.threads, args.timeout)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.execv(argv[0], argv)
    return 0  # not reached


def _manage(args: argparse.Namespace) -> int:
    from django.core.management import execute_from_command_line

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    execute_from_command_line(["tidemark manage", *args.rest])
    return 0


def add_commands(commands: argparse._SubParsersAction) -> dict[str, Callable]:
    host = os.environ.get("TIDEMARK_HOST") or "127.0.0.1"
    port = os.environ.get("TIDEMARK_PORT") or "8000"
    serve = commands.add_parser(
        "serve",
        help="serve the console with gunicorn (gthread workers)",
        description="Serve console.wsgi with gunicorn's gthread workers, access log on "
        "stderr. Run `tidemark manage collectstatic` first (docs/OPERATIONS.md).",
    )
    serve.add_argument(
        "--bind", default=f"{host}:{port}", help="address:port (TIDEMARK_HOST, TIDEMARK_PORT)"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WEB_CONCURRENCY") or 2),
        help="processes (WEB_CONCURRENCY, default 2)",
    )
    serve.add_argument("--threads", type=int, default=8, help="threads per process")
    serve.add_argument(
        "--timeout", type=int, default=60, help="seconds before a stuck worker is restarted"
    )
    manage = commands.add_parser(
        "manage",
        help="a Django management command (migrate, collectstatic, createsuperuser, ...)",
        prefix_chars="\0",
    )
    manage.add_argument("rest", nargs=argparse.REMAINDER)
    return {"serve": _serve, "manage": _manage}
