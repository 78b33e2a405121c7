"""The installed ``tidemark`` command, run as an operator runs it: the engine's subcommands,
the group verbs (a reset is previewed unless --execute, and an applied one is in the
group's Resets list and the audit log), ``manage``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

TIDEMARK = Path(sys.executable).parent / "tidemark"
#: The tree these tests are in: its packages, not those the venv was installed from.
TREE = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    """An environment with its own database (migrated) and store: topic orders, 2 queues,
    5 messages on queue 0, group billing committed at 3 there."""
    root = tmp_path_factory.mktemp("tidemark")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DEBUG="true",
        TIDEMARK_ENV_FILE=os.devnull,
        DATABASE_URL=f"sqlite:///{root / 'db.sqlite3'}",
        TIDEMARK_STORE_DIR=str(root / "store"),
        TIDEMARK_CLI_USER="ops-anna",
        PYTHONPATH=os.pathsep.join(filter(None, [str(TREE), os.environ.get("PYTHONPATH")])),
    )
    for args in (
        ["manage", "migrate", "--noinput", "-v", "0"],
        ["--segment-bytes", "65536", "create-topic", "orders", "--queues", "2"],
        ["produce", "orders", "--count", "5", "--queue", "0"],
        ["consume", "orders", "--queue", "0", "--group", "billing", "--max", "3", "--commit"],
    ):
        result = tidemark(env, *args)
        assert result.returncode == 0, result.stderr
    env["ROOT"] = str(root)
    return env


def tidemark(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(TIDEMARK), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_is_installed_with_every_verb():
    help_text = subprocess.run(
        [str(TIDEMARK), "--help"], capture_output=True, text=True, timeout=60
    ).stdout

    for verb in ("stat", "consume", "verify", "groups", "lag", "reset-offsets", "redrive-dlq"):
        assert verb in help_text
    assert "serve" in help_text and "manage" in help_text


@pytest.mark.parametrize("verb", [["stat"], ["consume", "orders"], ["verify"], ["groups"]])
def test_read_only_verbs_refuse_a_directory_that_is_not_a_store(home, tmp_path, verb):
    result = tidemark(home, "--dir", str(tmp_path), *verb)

    assert result.returncode == 3
    assert "is not a Tidemark store" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_lag_lists_each_queue_as_the_store_has_it(home):
    result = tidemark(home, "lag", "--group", "billing", "--json")

    assert result.returncode == 0, result.stderr
    rows = {row["queue"]: row for row in json.loads(result.stdout)}
    assert (rows[0]["committed"], rows[0]["max_offset"], rows[0]["lag"]) == (3, 5, 2)
    assert (rows[1]["committed"], rows[1]["lag"]) == (None, 0)


def test_lag_json_rows_use_the_api_field_names(home):
    from console.api.read_models import GroupQueueSerializer

    result = tidemark(home, "lag", "--group", "billing", "--json")

    assert result.returncode == 0, result.stderr
    api_fields = set(GroupQueueSerializer().fields)
    for row in json.loads(result.stdout):
        assert set(row) == {"topic", "queue", "committed", "max_offset", "lag", "lost"}
        assert set(row) <= api_fields


def test_groups_lists_the_group_with_its_lag(home):
    result = tidemark(home, "groups")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0].split() == ["GROUP", "TOPICS", "LAG", "MEMBERS"]
    assert result.stdout.split("\n")[1].split()[:3] == ["billing", "orders", "2"]


def test_groups_json_rows_use_the_api_field_names(home):
    from console.api.read_models import GroupSerializer

    result = tidemark(home, "groups", "--json")

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
def test_each_mode_s_flag_previews_that_mode(home, group, flag, targets):
    """Each mode's flag previews its targets (billing still at 3 on queue 0: these run
    before the reset below is applied); a dry run changes nothing."""
    result = tidemark(home, "reset-offsets", "--group", group, "--topic", "orders", *flag, "--json")

    assert result.returncode == 0, result.stderr
    preview = json.loads(result.stdout)
    assert preview["dry_run"] is True
    moving = [q for q in preview["queues"] if q["current"] != q["target"]]
    assert [[q["queue"], q["current"], q["target"]] for q in moving] == targets


def test_a_reset_preview_json_is_the_api_s_plan_without_its_token(home):
    from console.api.read_models import ResetPlanSerializer

    result = tidemark(
        home, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-latest", "--json"
    )

    assert result.returncode == 0, result.stderr
    preview = json.loads(result.stdout)
    kept_only = {"token", "live_members", "expires_ms"}
    assert set(preview) == set(ResetPlanSerializer().fields) - kept_only | {"dry_run"}
    assert (preview["changes"], preview["queue_count"], preview["skipped"]) == (1, 2, 2)


def test_a_reset_to_bad_offsets_is_one_sentence(home):
    result = tidemark(
        home, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-offsets", "0=x"
    )

    assert result.returncode == 3
    assert result.stderr == ("error: Line 1 (0=x) is not queue=offset with whole numbers ≥ 0.\n")


def test_a_reset_is_a_dry_run_unless_executed_then_undoable_and_audited(home):
    preview = tidemark(
        home, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest"
    )
    assert preview.returncode == 0, preview.stderr
    assert "dry run" in preview.stderr
    assert preview.stdout.split("\n")[1].split()[:5] == ["0", "3", "0", "3", "0"]
    lag = json.loads(tidemark(home, "lag", "--group", "billing", "--json").stdout)
    assert lag[0]["committed"] == 3  # nothing changed

    applied = tidemark(
        home,
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
    lag = json.loads(tidemark(home, "lag", "--group", "billing", "--json").stdout)
    assert lag[0]["committed"] == 0
    with sqlite3.connect(Path(home["ROOT"]) / "db.sqlite3") as db:
        reset = db.execute(
            "SELECT who FROM groups_appliedreset WHERE id = ?", (outcome["reset_id"],)
        ).fetchone()
        audit = db.execute(
            "SELECT username FROM audit_auditentry WHERE action = 'offset.reset'"
        ).fetchall()
    assert reset == ("cli:ops-anna",)
    assert audit == [("cli:ops-anna",)]


def test_a_reset_to_a_bad_time_is_one_sentence(home):
    result = tidemark(
        home, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-datetime", "x"
    )

    assert result.returncode == 3
    assert result.stderr == "error: --to-datetime 'x' is not an ISO 8601 time\n"


def test_the_verbs_close_the_store_cleanly(home):
    """Each command closes the store: the next opening finds a clean shutdown, not a crash."""
    assert tidemark(home, "lag", "--group", "billing").returncode == 0

    stat = json.loads(tidemark(home, "stat", "--json").stdout)

    assert stat["last_recovery"]["clean_shutdown"] is True


def test_redrive_dlq_of_a_group_without_dead_letters_sends_nothing(home):
    result = tidemark(home, "redrive-dlq", "--group", "billing", "--all")

    assert result.returncode == 0, result.stderr
    assert "Sent 0 dead letters" in result.stdout


def test_filter_jsonl_writes_json_lines_ending_with_the_trailer(home):
    result = tidemark(home, "filter", "orders", "queue == 0", "--jsonl", "--max", "2")

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [m["queue_offset"] for m in lines[:-1]] == [0, 1]
    assert lines[-1]["export"]["continue"].startswith("tidemark --dir ")


def test_filter_without_jsonl_is_the_engines_printed_scan(home):
    result = tidemark(home, "filter", "orders", "queue == 0", "--max", "2")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("0:0\t")
    assert "go on with --cursor" in result.stderr
