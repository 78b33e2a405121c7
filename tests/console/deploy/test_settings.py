import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import database_config, env_bool, env_list, env_path, env_str, secret_key

PROJECT_ROOT = Path(__file__).resolve().parents[3]


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

    root = Path(__file__).resolve().parents[3]
    settings_text = (root / "console" / "settings.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', settings_text))
    listed = set(re.findall(r"^([A-Z0-9_]+)=", (root / ".env.example").read_text(), re.M))

    assert read, "no env_* call found in settings.py"
    assert read <= listed, f"missing from .env.example: {sorted(read - listed)}"


def test_env_example_lists_every_store_setting_with_its_default():
    from storeadapter.store_env import STORE_SETTINGS

    text = (PROJECT_ROOT / ".env.example").read_text()
    listed = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", text, re.M))

    for setting in STORE_SETTINGS:
        assert setting.env in listed, setting.env
        assert setting.parse(listed[setting.env]) == setting.default, setting.env


def test_the_operations_doc_lists_every_store_setting():
    from storeadapter.store_env import STORE_SETTINGS

    text = (PROJECT_ROOT / "docs" / "OPERATIONS.md").read_text()

    assert [s.env for s in STORE_SETTINGS if f"`{s.env}`" not in text] == []


def test_every_store_setting_reaches_the_store_config():
    from storeadapter.store_env import store_options

    environ = {
        "TIDEMARK_RETENTION_HOURS": "12",
        "TIDEMARK_DISK_WARN_RATIO": "0.5",
        "TIDEMARK_DISK_FORCE_RATIO": "0.6",
        "TIDEMARK_DISK_REJECT_RATIO": "0.7",
        "TIDEMARK_MAX_MESSAGE_BYTES": "1024",
        "TIDEMARK_DEDUP_WINDOW_S": "30",
        "TIDEMARK_SEGMENT_BYTES": "65536",
        "TIDEMARK_FLUSH_MODE": "sync",
        "TIDEMARK_FLUSH_INTERVAL_MS": "250",
    }

    assert store_options(environ) == {
        "retention_hours": 12.0,
        "disk_warn_ratio": 0.5,
        "disk_force_ratio": 0.6,
        "disk_reject_ratio": 0.7,
        "max_message_bytes": 1024,
        "dedup_window_s": 30,
        "segment_bytes": 65536,
        "flush_mode": "sync",
        "flush_interval_ms": 250,
    }


@pytest.mark.parametrize(
    ("environ", "sentence"),
    [
        ({"TIDEMARK_RETENTION_HOURS": "a week"}, "TIDEMARK_RETENTION_HOURS='a week' is not a"),
        ({"TIDEMARK_DISK_WARN_RATIO": "0.95"}, "disk_warn_ratio <= disk_force_ratio"),
        ({"TIDEMARK_SEGMENT_BYTES": "12"}, "segment_bytes must be at least"),
    ],
)
def test_a_bad_store_setting_is_refused_with_a_sentence(environ, sentence):
    from storeadapter.store_env import StoreSettingError, store_options

    with pytest.raises(StoreSettingError, match=re.escape(sentence)):
        store_options(environ)


def test_settings_read_the_env_file_and_the_environment_wins(tmp_path):
    env_file = tmp_path / "tidemark.env"
    env_file.write_text("TIDEMARK_RETENTION_HOURS=6\nTIDEMARK_DEDUP_WINDOW_S=5\n")

    code = "from console.core.store import store_config; c = store_config(); "
    code += "print(c.retention_hours, c.dedup_window_s)"
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "TIDEMARK_ENV_FILE": str(env_file),
            "TIDEMARK_DEDUP_WINDOW_S": "7",
        },
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["6.0", "7"]


def test_a_bad_store_setting_stops_manage_py_with_one_sentence():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        env={
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "TIDEMARK_DISK_REJECT_RATIO": "2",
        },
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode != 0
    assert "disk ratios must satisfy" in result.stderr
    assert "Traceback" not in result.stderr
