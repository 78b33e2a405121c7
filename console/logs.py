"""The LOGGING setting: request errors, Celery task failures and the store's reports to
stderr, as plain lines or one JSON object a line (TIDEMARK_LOG_FORMAT=json)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

FORMATS = ("plain", "json")
#: The loggers that say what an operator needs: requests that failed, tasks that failed
#: (Celery's tracer), and the console's and the store's own reports.
LOGGERS = ("django.request", "django.security", "celery", "console", "storeadapter")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        status = getattr(record, "status_code", None)
        if status is not None:
            entry["status"] = status
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def logging_config(style: str, level: str) -> dict[str, Any]:
    """Django's LOGGING for ``style`` (plain or json) at ``level`` (INFO, WARNING, ...)."""
    style, level = style.strip().lower(), level.strip().upper()
    if style not in FORMATS:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"TIDEMARK_LOG_FORMAT={style!r}: use plain or json.")
    if not isinstance(logging.getLevelName(level), int):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"TIDEMARK_LOG_LEVEL={level!r} is not a logging level.")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
            "json": {"()": "console.logs.JsonFormatter"},
        },
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": style,
            },
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        "loggers": {
            name: {"handlers": ["stderr"], "level": level, "propagate": False} for name in LOGGERS
        },
    }
