"""The ``tidemark`` command as an operator runs it: the engine's subcommands, the group
verbs (a reset is previewed unless --execute, and an applied one is in the group's Resets
list and the audit log), ``manage``.

The verbs run in this process through the command's own ``main`` (its argument parsing,
its dispatch to the engine or to the console's services, its exit codes, its stdout and
stderr): a new Python with Django set up for each cost 1.3 s of CPU a command. What needs
the installed command itself runs it as a process: its entry point and help, and
``--dir`` reaching the console's settings before Django is set up."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from django.utils.log import configure_logging

from console.audit.models import AuditEntry
from console.cli import main
from console.groups.models import AppliedReset
from console.logs import logging_config

TIDEMARK = Path(sys.executable).parent / "tidemark"
#: The tree these tests are in: its packages, not those the venv was installed from.
TREE = Path(__file__).resolve().parents[3]


@dataclass
class Ran:
    """What a command left: its exit code, stdout and stderr (as a process's would be)."""

    returncode: int
    stdout: str
    stderr: str


def run_main(*args: str) -> Ran:
    """``tidemark ARGS`` through ``console.cli.main``; argparse's exits are exit codes. What
    the command puts in the environment (``--dir``, the .env file) goes with it, as with a
    process's."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.dict(os.environ),
    ):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    """A store made by the engine's verbs: topic orders, 2 queues, 5 messages on queue 0,
    group billing committed at 3 there."""
    store = tmp_path_factory.mktemp("tidemark") / "store"
    for args in (
        ["--segment-bytes", "65536", "create-topic", "orders", "--queues", "2"],
        ["produce", "orders", "--count", "5", "--queue", "0"],
        ["consume", "orders", "--queue", "0", "--group", "billing", "--max", "3", "--commit"],
    ):
        result = run_main("--dir", str(store), *args)
        assert result.returncode == 0, result.stderr
    return store


@pytest.fixture
def tidemark(store_dir, db, settings, monkeypatch):
    """``tidemark(*args)``: the command run in this process as ops-anna, on the store above
    and the test database (migrated by pytest-django, as ``manage migrate`` did), logging
    as the command does (warnings only: it sets TIDEMARK_LOG_LEVEL before Django starts)."""
    monkeypatch.setenv("TIDEMARK_ENV_FILE", os.devnull)
    monkeypatch.setenv("TIDEMARK_STORE_DIR", str(store_dir))
    monkeypatch.setenv("TIDEMARK_CLI_USER", "ops-anna")
    settings.TIDEMARK_STORE_DIR = store_dir
    settings.TIDEMARK_STORE_OPTIONS = {}
    suite_logging = settings.LOGGING
    settings.LOGGING = logging_config("plain", "WARNING")
    yield run_main
    # The verbs' django.setup() configured logging with the command's; the suite's again.
    configure_logging(settings.LOGGING_CONFIG, suite_logging)


def installed(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The installed command in a process of its own, on the tree these tests are in."""
    env = {k: v for k, v in (env or os.environ).items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TREE), env.get("PYTHONPATH")]))
    return subprocess.run(
        [str(TIDEMARK), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_is_installed_with_every_verb():
    help_text = installed("--help").stdout

    for verb in ("stat", "consume", "verify", "groups", "lag", "reset-offsets", "redrive-dlq"):
        assert verb in help_text
    assert "serve" in help_text and "manage" in help_text


@pytest.mark.parametrize("verb", [["stat"], ["consume", "orders"], ["verify"]])
def test_read_only_verbs_refuse_a_directory_that_is_not_a_store(tidemark, tmp_path, verb):
    result = tidemark("--dir", str(tmp_path), *verb)

    assert result.returncode == 3
    assert "is not a Tidemark store" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_dir_reaches_the_console_s_settings_in_the_installed_command(tmp_path):
    """``--dir`` is put in the environment before Django reads its settings: the installed
    command's group verbs refuse a folder that is no store, with the exit code."""
    env = dict(os.environ, DEBUG="true", TIDEMARK_ENV_FILE=os.devnull)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    empty = tmp_path / "empty"
    empty.mkdir()

    result = installed("--dir", str(empty), "groups", env=env)

    assert result.returncode == 3
    assert f"{empty} is not a Tidemark store" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(empty.iterdir()) == []


def test_lag_lists_each_queue_as_the_store_has_it(tidemark):
    result = tidemark("lag", "--group", "billing", "--json")

    assert result.returncode == 0, result.stderr
    rows = {row["queue"]: row for row in json.loads(result.stdout)}
    assert (rows[0]["committed"], rows[0]["max_offset"], rows[0]["lag"]) == (3, 5, 2)
    assert (rows[1]["committed"], rows[1]["lag"]) == (None, 0)


def test_lag_json_rows_use_the_api_field_names(tidemark):
    from console.api.read_models import GroupQueueSerializer

    result = tidemark("lag", "--group", "billing", "--json")

    assert result.returncode == 0, result.stderr
    api_fields = set(GroupQueueSerializer().fields)
    for row in json.loads(result.stdout):
        assert set(row) == {"topic", "queue", "committed", "max_offset", "lag", "lost"}
        assert set(row) <= api_fields


def test_groups_lists_the_group_with_its_lag(tidemark):
    result = tidemark("groups")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0].split() == ["GROUP", "TOPICS", "LAG", "MEMBERS"]
    assert result.stdout.split("\n")[1].split()[:3] == ["billing", "orders", "2"]


def test_groups_json_rows_use_the_api_field_names(tidemark):
    from console.api.read_models import GroupSerializer

    result = tidemark("groups", "--json")

    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert list(row) == list(GroupSerializer().fields)


@pytest.mark.parametrize(
    ("group", "flag", "targets"),
    [
        ("billing", ["--to-latest"], [[0, 3, 5]]),
        ("billing", ["--to-offsets", "0=1"], [[0, 3, 1]]),
        ("billing", ["--to-datetime", "9999-01-01T00:00:00Z"], [[0, 3, 5]]),
        ("billing", ["--shift-by", "1"], [[0, 3, 4]]),
        ("copier", ["--from-group", "billing"], [[0, 0, 3]]),
    ],
)
def test_each_mode_s_flag_previews_that_mode(tidemark, group, flag, targets):
    """Each mode's flag previews its targets (billing still at 3 on queue 0: these run
    before the reset below is applied); a dry run changes nothing."""
    result = tidemark("reset-offsets", "--group", group, "--topic", "orders", *flag, "--json")

    assert result.returncode == 0, result.stderr
    preview = json.loads(result.stdout)
    assert preview["dry_run"] is True
    moving = [q for q in preview["queues"] if q["current"] != q["target"]]
    assert [[q["queue"], q["current"], q["target"]] for q in moving] == targets


def test_a_reset_preview_json_is_the_api_s_plan_without_its_token(tidemark):
    from console.api.read_models import ResetPlanSerializer

    result = tidemark(
        "reset-offsets", "--group", "billing", "--topic", "orders", "--to-latest", "--json"
    )

    assert result.returncode == 0, result.stderr
    preview = json.loads(result.stdout)
    kept_only = {"token", "live_members", "expires_ms"}
    assert set(preview) == set(ResetPlanSerializer().fields) - kept_only | {"dry_run"}
    assert (preview["changes"], preview["queue_count"], preview["skipped"]) == (1, 2, 2)


def test_a_reset_to_bad_offsets_is_one_sentence(tidemark):
    result = tidemark(
        "reset-offsets", "--group", "billing", "--topic", "orders", "--to-offsets", "0=x"
    )

    assert result.returncode == 3
    assert result.stderr == ("error: Line 1 (0=x) is not queue=offset with whole numbers ≥ 0.\n")


def test_a_reset_is_a_dry_run_unless_executed_then_undoable_and_audited(tidemark):
    preview = tidemark("reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest")
    assert preview.returncode == 0, preview.stderr
    assert "dry run" in preview.stderr
    assert preview.stdout.split("\n")[1].split()[:5] == ["0", "3", "0", "3", "0"]
    lag = json.loads(tidemark("lag", "--group", "billing", "--json").stdout)
    assert lag[0]["committed"] == 3  # nothing changed

    applied = tidemark(
        "reset-offsets",
        "--group",
        "billing",
        "--topic",
        "orders",
        "--to-earliest",
        "--execute",
        "--json",
    )

    assert applied.returncode == 0, applied.stderr
    outcome = json.loads(applied.stdout)
    assert [(c["queue"], c["old"], c["new"]) for c in outcome["changes"]] == [(0, 3, 0)]
    assert (outcome["changed"], outcome["consumed_again"]) == (1, 3)
    lag = json.loads(tidemark("lag", "--group", "billing", "--json").stdout)
    assert lag[0]["committed"] == 0
    assert AppliedReset.objects.get(id=outcome["reset_id"]).who == "cli:ops-anna"
    audit = AuditEntry.objects.filter(action="offset.reset")
    assert list(audit.values_list("username", flat=True)) == ["cli:ops-anna"]


def test_a_reset_to_a_bad_time_is_one_sentence(tidemark):
    result = tidemark(
        "reset-offsets", "--group", "billing", "--topic", "orders", "--to-datetime", "x"
    )

    assert result.returncode == 3
    assert result.stderr == "error: --to-datetime 'x' is not an ISO 8601 time\n"


def test_the_verbs_close_the_store_cleanly(tidemark):
    """Each command closes the store: the next opening finds a clean shutdown, not a crash."""
    assert tidemark("lag", "--group", "billing").returncode == 0

    stat = json.loads(tidemark("stat", "--json").stdout)

    assert stat["last_recovery"]["clean_shutdown"] is True


def test_redrive_dlq_of_a_group_without_dead_letters_sends_nothing(tidemark):
    result = tidemark("redrive-dlq", "--group", "billing", "--all")

    assert result.returncode == 0, result.stderr
    assert "Sent 0 dead letters" in result.stdout


def test_filter_jsonl_writes_json_lines_ending_with_the_trailer(tidemark):
    result = tidemark("filter", "orders", "queue == 0", "--jsonl", "--max", "2")

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [m["queue_offset"] for m in lines[:-1]] == [0, 1]
    assert lines[-1]["export"]["continue"].startswith("tidemark --dir ")


def test_filter_without_jsonl_is_the_engines_printed_scan(tidemark):
    result = tidemark("filter", "orders", "queue == 0", "--max", "2")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("0:0\t")
    assert "go on with --cursor" in result.stderr
