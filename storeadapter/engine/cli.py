"""The store's command line: ``python -m storeadapter.engine --help``.

Exit codes: 0 done (``verify``: the store is healthy); 1 ``verify`` found damage;
2 bad usage; 3 the store refused, is not a Tidemark store or cannot be read (the
sentence says why); 130 interrupted. Only ``create-topic`` creates a store where there is
none; every other command refuses such a directory (exit 3) and leaves it as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .config import StoreConfig
from .errors import StoreError
from .exitcodes import EXIT_CORRUPT, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE_ERROR, EXIT_USAGE
from .metadata import is_store
from .names import check_new_topic_name
from .results import Message, StoredMessage
from .store import MessageStore
from .verify import LABELS as VERIFY_LABELS
from .verify import verify_store

#: The only command that may create a store where there is none; the others refuse.
CREATES_STORE = frozenset({"create-topic"})


def _default_dir() -> str:
    return os.environ.get("TIDEMARK_STORE_DIR") or "var/store"


def build_parser(prog: str = "python -m storeadapter.engine") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Create topics, produce, consume, inspect and verify a Tidemark store.",
    )
    parser.add_argument(
        "--dir",
        default=_default_dir(),
        help="store directory (default: $TIDEMARK_STORE_DIR or var/store)",
    )
    parser.add_argument("--flush-mode", choices=("async", "sync"), default="async")
    parser.add_argument(
        "--segment-bytes",
        type=int,
        help="size of new segments (default: what the store was created with, else 1 GiB)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    create = commands.add_parser("create-topic", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--queues", type=int, default=4)

    delete = commands.add_parser("delete-topic", help="delete a topic and its offsets")
    delete.add_argument("topic")

    commands.add_parser("topics", help="list topics")

    produce = commands.add_parser(
        "produce", help="append stdin lines (or --count generated messages) to a topic"
    )
    produce.add_argument("topic")
    produce.add_argument("--key")
    produce.add_argument("--tag")
    produce.add_argument("--queue", type=int)
    produce.add_argument("--count", type=int, help="generate COUNT messages instead of stdin")
    produce.add_argument("--size", type=int, default=100, help="body size of generated messages")
    produce.add_argument("--batch", type=int, default=500, help="messages per append_batch")
    produce.add_argument("--ids", action="store_true", help="print each message id")

    consume = commands.add_parser("consume", help="print messages of a topic's queues")
    consume.add_argument("topic")
    consume.add_argument("--queue", type=int, help="one queue (default: every queue)")
    consume.add_argument("--offset", type=int, default=0, help="first queue offset")
    consume.add_argument("--max", type=int, default=100, help="messages per queue at most")
    consume.add_argument("--tag")
    consume.add_argument("--group", help="start at the group's committed offset")
    consume.add_argument("--commit", action="store_true", help="commit what was printed")
    consume.add_argument("--format", choices=("text", "json", "hex"), default="text")

    filtering = commands.add_parser(
        "filter",
        help="print the messages of a topic that a filter expression matches",
        description=(
            "Scan a topic's queues (in queue order) and print the messages a CEL expression\n"
            "matches, evaluated natively per record: topic, queue, offset, commit_offset,\n"
            "born_ms, stored_ms, tag, key, keys, properties, text, body (JSON), body_size;\n"
            "e.g. 'body.order.total > 100 && tag == \"paid\"'. The scan is bounded; when it\n"
            "stops before the end it says the --cursor to go on from. An expression that\n"
            "does not compile exits 2 with its position."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    filtering.add_argument("topic")
    filtering.add_argument("expression")
    filtering.add_argument(
        "--queue", type=int, action="append", help="a queue to scan (repeat; default: every)"
    )
    filtering.add_argument("--cursor", help="go on from here (queue:offset), as told before")
    filtering.add_argument("--max", type=int, default=100, help="matches to print at most")
    filtering.add_argument("--max-records", type=int, default=1_000_000, help="records at most")
    filtering.add_argument("--max-seconds", type=float, default=5.0, help="seconds at most")
    filtering.add_argument("--format", choices=("text", "json", "hex"), default="text")

    get = commands.add_parser("get", help="print one message by id")
    get.add_argument("message_id")
    get.add_argument("--format", choices=("text", "json", "hex"), default="json")

    stat = commands.add_parser("stat", help="segments, disk use, topics and queues")
    stat.add_argument("--json", action="store_true")

    verify = commands.add_parser(
        "verify",
        help="check every file of the store, read-only; exit 1 on damage",
        description=(
            "Check every file of the store without changing a byte of it: the commit log,\n"
            "the checkpoint, store.json and topics.json, the consume queues, the key index\n"
            "and the consumer offsets. Prints one line per problem, then a summary line per\n"
            'kind of file (docs/OPERATIONS.md, "Verifying a store").'
        ),
        epilog=VERIFY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog) if prog else build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command not in CREATES_STORE and not is_store(Path(args.dir)):
            raise StoreError(
                f"{args.dir} is not a Tidemark store: it holds no commit log (no commitlog "
                "directory) and no store.json; check --dir or TIDEMARK_STORE_DIR, or make "
                "one with create-topic"
            )
        if args.command == "verify":
            return _verify(args)
        config = StoreConfig(segment_bytes=_segment_bytes(args), flush_mode=args.flush_mode)
        with MessageStore.open(args.dir, config) as store:
            return COMMANDS[args.command](store, args)
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_STORE_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except OSError as error:
        print(f"error: {error.strerror or error} ({error.filename or args.dir})", file=sys.stderr)
        return EXIT_STORE_ERROR


def _segment_bytes(args: argparse.Namespace) -> int:
    if args.segment_bytes is not None:
        return args.segment_bytes
    try:
        return int(json.loads((Path(args.dir) / "store.json").read_bytes())["segment_bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return StoreConfig.segment_bytes


def _create_topic(store: MessageStore, args: argparse.Namespace) -> int:
    info = store.create_topic(check_new_topic_name(args.topic), queues=args.queues)
    print(f"created topic {info.name} with {info.queues} queues")
    return EXIT_OK


def _delete_topic(store: MessageStore, args: argparse.Namespace) -> int:
    store.delete_topic(args.topic)
    print(f"deleted topic {args.topic}")
    return EXIT_OK


def _topics(store: MessageStore, args: argparse.Namespace) -> int:
    stats = store.stats().topics
    for info in store.topics():
        print(f"{info.name}\t{info.queues} queues\t{stats[info.name].messages} messages")
    return EXIT_OK


def _bodies(args: argparse.Namespace) -> Iterator[bytes]:
    if args.count is not None:
        if args.count < 0 or args.size < 0:
            raise StoreError("--count and --size must not be negative")
        body = (b"0123456789abcdef" * (args.size // 16 + 1))[: args.size]
        for _ in range(args.count):
            yield body
    else:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\r\n")


def _produce(store: MessageStore, args: argparse.Namespace) -> int:
    if args.batch < 1:
        raise StoreError("--batch must be at least 1")
    started = time.perf_counter()
    total = 0
    batch: list[Message] = []

    def send() -> None:
        nonlocal total
        for result in store.append_batch(args.topic, batch):
            if args.ids:
                print(result.message_id, result.queue, result.queue_offset, result.status)
        total += len(batch)
        batch.clear()

    for body in _bodies(args):
        batch.append(Message(body, args.key, args.tag, args.queue))
        if len(batch) >= args.batch:
            send()
    if batch:
        send()
    elapsed = time.perf_counter() - started
    rate = total / elapsed if elapsed > 0 else 0.0
    print(f"appended {total} messages to {args.topic} ({rate:,.0f} msgs/s)", file=sys.stderr)
    return EXIT_OK


def _consume(store: MessageStore, args: argparse.Namespace) -> int:
    if args.max < 1:
        raise StoreError("--max must be at least 1")
    if args.commit and not args.group:
        raise StoreError("--commit needs --group")
    queues = [args.queue] if args.queue is not None else range(store.topic(args.topic).queues)
    for queue in queues:
        offset = args.offset
        if args.group:
            committed = store.committed_offset(args.group, args.topic, queue)
            offset = committed if committed is not None else offset
        result = store.read_result(args.topic, queue, offset, args.max, args.tag)
        for message in result.messages:
            print(_show(message, args.format))
        if args.commit and result.next_offset != offset:
            store.commit_offset(args.group, args.topic, queue, result.next_offset, who="cli")
    return EXIT_OK


def _filter(store: MessageStore, args: argparse.Namespace) -> int:
    from . import filters

    if args.max < 1 or args.max_records < 1 or args.max_seconds <= 0:
        raise StoreError("--max and --max-records must be at least 1, --max-seconds above 0")
    try:
        result = filters.scan(
            store,
            args.topic,
            args.expression,
            queues=args.queue,
            cursor=args.cursor,
            max_records=args.max_records,
            max_seconds=args.max_seconds,
            max_matches=args.max,
        )
    except filters.FilterSyntaxError as error:
        line = args.expression.split("\n")[error.line - 1] if args.expression else ""
        print(f"error: the expression does not compile: {error}", file=sys.stderr)
        print(f"  {line}\n  {' ' * (error.column - 1)}^", file=sys.stderr)
        return EXIT_USAGE
    for message in result.messages:
        print(_show(message, args.format))
    summary = f"{len(result.messages)} matched of {result.scanned} records scanned"
    if result.errors:
        summary += f"; {result.errors} could not be evaluated (first: {result.first_error})"
    if result.cursor is not None:
        summary += f"; stopped ({result.stopped}): go on with --cursor {result.cursor}"
    print(summary, file=sys.stderr)
    return EXIT_OK


def _get(store: MessageStore, args: argparse.Namespace) -> int:
    print(_show(store.get(args.message_id), args.format))
    return EXIT_OK


def _show(message: StoredMessage, style: str) -> str:
    if style == "json":
        data = message._asdict()
        data["body"] = message.body.decode("utf-8", errors="replace")
        return json.dumps(data, ensure_ascii=False)
    body = message.body.hex() if style == "hex" else message.body.decode("utf-8", "replace")
    return f"{message.queue}:{message.queue_offset}\t{message.message_id}\t{body}"


def _stat(store: MessageStore, args: argparse.Namespace) -> int:
    stats = store.stats()
    if args.json:
        print(json.dumps(stats.as_dict(), indent=2))
        return EXIT_OK
    log = stats.commit_log
    print(f"store      {stats.path} (id {stats.store_id}, flush {stats.flush_mode})")
    print(f"segments   {stats.segment_count}, {stats.disk_bytes:,} bytes on disk")
    print(f"log        offsets {log.min_offset:,} to {log.tail:,}")
    recovery = stats.last_recovery
    print(
        f"recovery   {'clean' if recovery.clean_shutdown else 'after a crash'}, "
        f"{recovery.duration_ms} ms, {recovery.truncated_bytes} bytes truncated, "
        f"{len(recovery.corruptions)} corrupt stretches"
    )
    for name, topic in stats.topics.items():
        print(f"topic      {name}: {topic.messages:,} messages")
        for queue, info in topic.queues.items():
            print(f"  queue {queue:<4} offsets {info.min_offset:,} to {info.max_offset:,}")
    return EXIT_OK


VERIFY_EXIT_CODES = """exit codes:
  0    the store is healthy (notes about a crash's leftovers may be printed)
  1    damage found: one "corrupt: <file>: <what>" line each
  2    bad usage
  3    not a Tidemark store, or a file cannot be read
  130  interrupted"""


def _verify(args: argparse.Namespace) -> int:
    show_progress = not args.quiet and sys.stderr.isatty()

    def progress(kind: str, done: int, total: int) -> None:
        if total:
            label = VERIFY_LABELS[kind]
            print(
                f"\rverifying {label:<15}{done / total:6.1%}", end="", file=sys.stderr, flush=True
            )

    report = verify_store(Path(args.dir), progress if show_progress else None)
    if show_progress:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        for problem in report.problems:
            print(problem.line())
        for line in report.summary():
            print(line)
    return EXIT_OK if report.ok else EXIT_CORRUPT


COMMANDS = {
    "create-topic": _create_topic,
    "delete-topic": _delete_topic,
    "topics": _topics,
    "produce": _produce,
    "consume": _consume,
    "get": _get,
    "filter": _filter,
    "stat": _stat,
}
