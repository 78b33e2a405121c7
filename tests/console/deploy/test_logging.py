"""LOGGING: request errors, Celery task failures and the store's recovery and retention
reports reach stderr, as plain lines or one JSON object a line (issue 21)."""

from __future__ import annotations

import io
import json
import logging
import sys
from logging.config import dictConfig

import pytest

from console.logs import logging_config


@pytest.fixture
def json_logs():
    """Configure LOGGING with the JSON format; yield a reader of the JSON lines its stderr
    handler wrote (the handler's stream is swapped for a buffer)."""
    dictConfig(logging_config("json", "INFO"))
    (handler,) = logging.getLogger("console").handlers
    assert handler.stream is sys.stderr
    buffer = io.StringIO()
    handler.setStream(buffer)

    def lines() -> list[dict]:
        return [json.loads(line) for line in buffer.getvalue().splitlines() if line]

    yield lines
    from django.conf import settings

    dictConfig(settings.LOGGING)


def test_a_request_error_is_one_json_line_with_its_traceback(json_logs):
    try:
        raise OverflowError("date value out of range")
    except OverflowError:
        logging.getLogger("django.request").error(
            "Internal Server Error: /audit/", exc_info=True, extra={"status_code": 500}
        )

    (entry,) = json_logs()
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "django.request"
    assert entry["message"] == "Internal Server Error: /audit/"
    assert entry["status"] == 500
    assert "OverflowError: date value out of range" in entry["exception"]


def test_a_failed_celery_task_is_logged_with_its_error(json_logs, db, settings):
    from celery import shared_task

    @shared_task(name="tests.logging.fails")
    def fails():
        raise RuntimeError("the disk said no")

    fails.apply()

    entries = [e for e in json_logs() if e["logger"].startswith("celery")]
    assert any(
        e["level"] == "ERROR" and "the disk said no" in (e.get("exception", "") + e["message"])
        for e in entries
    ), entries


def test_the_store_reports_its_recovery_when_this_process_opened_it(json_logs, store):
    entries = [e for e in json_logs() if e["logger"] == "storeadapter.recovery"]

    assert len(entries) == 1
    assert "opened after a clean shutdown" in entries[0]["message"]


def test_a_retention_run_is_logged(json_logs, store, db, redis_db, settings):
    from console.background.tasks import expire_segments, utc_now

    settings.TIDEMARK_RETENTION_HOUR = utc_now().hour

    expire_segments()

    entries = [e for e in json_logs() if e["logger"] == "storeadapter.retention"]
    assert len(entries) == 1
    assert "nothing deleted" in entries[0]["message"]


def test_plain_is_the_default_and_a_bad_format_is_refused():
    from django.core.exceptions import ImproperlyConfigured

    assert logging_config("plain", "INFO")["handlers"]["stderr"]["formatter"] == "plain"
    with pytest.raises(ImproperlyConfigured, match="use plain or json"):
        logging_config("xml", "INFO")
