"""``manage.py simulate``: demo traffic, so that a fresh console has something to show.

Producers write to ``orders`` and ``payments``; three consumer groups read them:
``billing`` keeps up (OK), ``analytics`` handles fewer messages than arrive (its lag only
grows: WARN), and ``archiver`` is stuck on one message while it keeps committing (STALL,
read as ERR). Two alert rules are created if missing, so within a few minutes an alert
fires and its email is printed by the Celery worker (the console email backend).
Ctrl-C (or ``--seconds``) stops it; the consumers leave their groups.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.alerts import kinds
from console.alerts.models import AlertRule
from console.core.store import get_store, store_config
from storeadapter.engine import Consumer, StoredMessage, StoreError, TopicExistsError

TOPICS = {"orders": 4, "payments": 2}
DEMO_RULES = [
    {
        "name": "Demo: a consumer group in error",
        "kind": AlertRule.STATUS_ERR,
        "for_seconds": kinds.StatusErr.default_for_seconds(),
        "repeat_seconds": 900,
    },
    {
        "name": "Demo: more than 2,000 messages behind",
        "kind": AlertRule.LAG_MESSAGES,
        "threshold": 2000,
        "for_seconds": 60,
        "repeat_seconds": 900,
    },
]
DEMO_RECIPIENTS = "ops@example.com"


class Command(BaseCommand):
    help = "Produce demo traffic with a healthy, a slow and a stalled consumer group."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--rate", type=float, default=40.0, help="orders per second (default 40)"
        )
        parser.add_argument(
            "--seconds", type=float, default=0.0, help="stop after this long (0: run until Ctrl-C)"
        )
        parser.add_argument(
            "--no-rules", action="store_true", help="do not create the demo alert rules"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rate = options["rate"]
        if not 0 < rate <= 100_000:
            raise CommandError("--rate is messages per second, more than 0 and at most 100000")
        if options["seconds"] < 0:
            raise CommandError("--seconds is 0 (run until Ctrl-C) or more")
        store = get_store()
        for topic, queues in TOPICS.items():
            with contextlib.suppress(TopicExistsError):  # made by an earlier run
                store.create_topic(topic, queues)
        if not options["no_rules"]:
            self._ensure_rules()
        stop = threading.Event()
        previous = {
            signum: signal.signal(signum, lambda *_: stop.set())
            for signum in (signal.SIGINT, signal.SIGTERM)
        }
        consumers = self._consumers(rate, stop)
        for consumer in consumers:
            consumer.start()
        self.stdout.write(
            f"simulate: producing {rate:g} orders/s and {rate / 4:g} payments/s; "
            "groups billing (healthy), analytics (slow), archiver (stalled). Ctrl-C stops."
        )
        deadline = time.monotonic() + options["seconds"] if options["seconds"] else None
        try:
            self._produce(rate, stop, deadline)
        finally:
            stop.set()
            for consumer in consumers:
                consumer.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        self.stdout.write("simulate: stopped")

    def _ensure_rules(self) -> None:
        for rule in DEMO_RULES:
            AlertRule.objects.get_or_create(
                name=rule["name"], defaults={**rule, "recipients": DEMO_RECIPIENTS}
            )

    def _consumers(self, rate: float, stop: threading.Event) -> list[Consumer]:
        path = settings.TIDEMARK_STORE_DIR
        config = store_config()
        slow_pause = 1.0 / (rate * 0.6)  # handles 60% of what arrives

        def healthy(message: StoredMessage) -> None:
            json.loads(message.body)

        def slow(message: StoredMessage) -> None:
            stop.wait(slow_pause)

        def stalled(message: StoredMessage) -> None:
            stop.wait()  # stuck until the simulation ends

        return [
            Consumer(path, "billing", ["orders", "payments"], healthy, config=config),
            Consumer(path, "analytics", "orders", slow, config=config),
            Consumer(path, "archiver", "payments", stalled, config=config),
        ]

    def _produce(self, rate: float, stop: threading.Event, deadline: float | None) -> None:
        store = get_store()
        tick = 0.25
        number = 0
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            started = time.monotonic()
            orders = _poisson(rate * tick)
            batch = []
            for _ in range(orders):
                number += 1
                customer = f"customer-{random.randrange(500)}"
                body = {"order": number, "customer": customer, "amount": random.randint(1, 500)}
                batch.append({"body": json.dumps(body), "key": customer, "tag": "created"})
            try:
                if batch:
                    store.append_batch("orders", batch)
                if random.random() < 0.25 * rate * tick:
                    payment = {"order": number, "status": random.choice(["paid", "refused"])}
                    store.append("payments", json.dumps(payment), key=f"order-{number}")
            except StoreError as error:
                self.stderr.write(f"simulate: the store refused a write: {error}")
                stop.wait(5)
            stop.wait(max(0.0, tick - (time.monotonic() - started)))


def _poisson(mean: float) -> int:
    """How many messages arrive in one tick: random, around ``mean``."""
    count, limit, product = 0, pow(2.718281828459045, -mean), random.random()
    while product > limit:
        count += 1
        product *= random.random()
    return count
