"""Read settings from the environment, with defaults built in.

An unset variable and an empty one both mean "use the default", so a copied
`.env.example` with blank values changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's value, or `default` when it is unset or empty."""
    value = _raw(name, environ)
    return default if value is None else value


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """A yes/no variable: 1/true/yes/on or 0/false/no/off, in any case."""
    value = _raw(name, environ)
    if value is None:
        return default
    word = value.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a yes/no value; use one of true, false, 1, 0, yes, no, on, off."
    )


def env_int(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """A whole-number variable."""
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number.") from None


def env_list(name: str, default: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_mapping(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Comma-separated ``key=value`` pairs (``admins=admin, ops=operator``); a key holds the
    text before its last ``=``, so it may contain ``=`` itself. Blank items are dropped."""
    value = _raw(name, environ)
    mapping: dict[str, str] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        key, sep, mapped = item.rpartition("=")
        if not sep or not key.strip() or not mapped.strip():
            raise ImproperlyConfigured(
                f"{name}: {item.strip()!r} is not a name=value pair "
                "(write them as name=value, separated by commas)."
            )
        mapping[key.strip()] = mapped.strip()
    return mapping


def env_path(
    name: str, default: Path | None, base_dir: Path, environ: Mapping[str, str] | None = None
) -> Path | None:
    """A filesystem path; `~` is expanded and a relative path is taken from `base_dir`."""
    value = _raw(name, environ)
    if value is None:
        return default
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def load_env_file(base_dir: Path) -> Path | None:
    """Read ``.env`` (or the file ``TIDEMARK_ENV_FILE`` names) into the environment,
    leaving variables that are already set alone; the file read, or None.

    So ``manage.py``, Celery and gunicorn started by hand see what ``make run`` sees.
    """
    named = _raw("TIDEMARK_ENV_FILE", None)
    path = Path(named).expanduser() if named else base_dir / ".env"
    if not path.is_file():
        return None
    load_dotenv(path, override=False)
    return path


def project_dir(code_dir: Path) -> Path:
    """Where relative paths and ``var/`` are taken from: the source checkout (it holds
    manage.py), or for an installed package the current folder."""
    return code_dir if (code_dir / "manage.py").is_file() else Path.cwd()


def database_config(url: str | None, base_dir: Path) -> dict[str, Any]:
    """Django's DATABASES["default"] for a DATABASE_URL.

    With no URL this is SQLite at `<base_dir>/var/console.sqlite3` (the `var/` folder is
    created). A relative SQLite path is taken from `base_dir`, not from the current folder.
    SQLite gets WAL mode, immediate transactions and a busy timeout, because the web
    server and background workers write to it at the same time.
    """
    if url is None or url.strip() == "":
        var_dir = base_dir / "var"
        var_dir.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{var_dir / 'console.sqlite3'}"
    config = dj_database_url.parse(url.strip())
    if config["ENGINE"] == "django.db.backends.sqlite3":
        name = str(config.get("NAME") or "")
        if name and name != ":memory:" and not name.startswith("file:"):
            path = Path(name).expanduser()
            config["NAME"] = str(path if path.is_absolute() else base_dir / path)
        config.setdefault("OPTIONS", {})
        config["OPTIONS"].setdefault("init_command", "PRAGMA journal_mode=WAL;")
        config["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
        config["OPTIONS"].setdefault("timeout", 20)
    return config


def secret_key(debug: bool, environ: Mapping[str, str] | None = None) -> str:
    """SECRET_KEY from the environment; a fixed development key is allowed only with DEBUG on."""
    value = _raw("SECRET_KEY", environ)
    if value is not None:
        return value
    if debug:
        return "django-insecure-tidemark-development-key-do-not-use-in-production"
    raise ImproperlyConfigured(
        "SECRET_KEY must be set in the environment when DEBUG is false; generate one with: "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
