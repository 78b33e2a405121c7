import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import database_config, env_bool, env_list, env_path, env_str, secret_key

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_database_url_postgres_is_parsed(tmp_path):
    config = database_config("postgres://tm:pw@db.example:5433/tidemark", tmp_path)

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("tidemark", "tm", "pw")
    assert (config["HOST"], config["PORT"]) == ("db.example", 5433)


def test_database_url_unset_defaults_to_sqlite_under_var(tmp_path):
    config = database_config(None, tmp_path)

    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "var" / "console.sqlite3")
    assert (tmp_path / "var").is_dir()


def test_database_url_relative_sqlite_path_is_taken_from_project_root(tmp_path):
    config = database_config("sqlite:///data/db.sqlite3", tmp_path)

    assert config["NAME"] == str(tmp_path / "data" / "db.sqlite3")


def test_store_dir_override_absolute(tmp_path):
    environ = {"TIDEMARK_STORE_DIR": "/srv/tidemark/store"}

    assert env_path("TIDEMARK_STORE_DIR", tmp_path / "default", tmp_path, environ) == Path(
        "/srv/tidemark/store"
    )


def test_store_dir_override_relative_is_taken_from_project_root(tmp_path):
    environ = {"TIDEMARK_STORE_DIR": "data/store"}

    assert env_path("TIDEMARK_STORE_DIR", Path("/unused"), tmp_path, environ) == (
        tmp_path / "data" / "store"
    )


def test_store_dir_unset_uses_default(tmp_path):
    assert env_path("TIDEMARK_STORE_DIR", tmp_path / "store", tmp_path, {}) == tmp_path / "store"


def settings_value(name: str, **env: str) -> str:
    """Import console.settings in a fresh interpreter with `env` and print one setting."""
    code = f"import console.settings as s; print(s.{name})"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_store_dir_setting_reads_environment_variable(tmp_path):
    value = settings_value("TIDEMARK_STORE_DIR", TIDEMARK_STORE_DIR=str(tmp_path / "store"))

    assert value == str(tmp_path / "store")


def test_database_setting_reads_environment_variable(tmp_path):
    value = settings_value(
        "DATABASES['default']['NAME']", DATABASE_URL=f"sqlite:///{tmp_path}/other.sqlite3"
    )

    assert value == f"{tmp_path}/other.sqlite3"


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]
)
def test_env_bool_accepts_common_words(raw, expected):
    assert env_bool("DEBUG", not expected, {"DEBUG": raw}) is expected


def test_env_bool_rejects_other_words_with_a_sentence():
    with pytest.raises(ImproperlyConfigured, match="not a yes/no value"):
        env_bool("DEBUG", True, {"DEBUG": "maybe"})


def test_empty_variable_means_default():
    assert env_str("REDIS_URL", "redis://127.0.0.1:6379/0", {"REDIS_URL": ""}) == (
        "redis://127.0.0.1:6379/0"
    )


def test_env_list_splits_on_commas():
    assert env_list("ALLOWED_HOSTS", [], {"ALLOWED_HOSTS": "a.example, b.example,"}) == [
        "a.example",
        "b.example",
    ]


def test_secret_key_required_when_debug_is_off():
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set"):
        secret_key(debug=False, environ={})


def test_secret_key_from_environment_is_used():
    assert secret_key(debug=False, environ={"SECRET_KEY": "k" * 50}) == "k" * 50


def test_env_example_lists_every_variable_the_settings_read():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    settings_text = (root / "console" / "settings.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', settings_text))
    listed = set(re.findall(r"^([A-Z0-9_]+)=", (root / ".env.example").read_text(), re.M))

    assert read, "no env_* call found in settings.py"
    assert read <= listed, f"missing from .env.example: {sorted(read - listed)}"
