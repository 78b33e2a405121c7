"""``tidemark topic-settings``: prints a topic's settings, sets them (audited as the user
it acts as), puts one back with ``default``, refuses bad values with exit 2."""

from __future__ import annotations

import argparse
import json

import pytest

from console.audit.models import AuditEntry
from console.cli import topic_verbs
from console.core.store import get_store

pytestmark = pytest.mark.django_db


@pytest.fixture
def verbs():
    parser = argparse.ArgumentParser()
    handlers = topic_verbs.add_commands(parser.add_subparsers(dest="verb"))

    def run(*args: str) -> int:
        parsed = parser.parse_args(args)
        return handlers[parsed.verb](parsed)

    return run


@pytest.fixture
def orders(store):
    store.create_topic("orders", 1)


def test_without_flags_it_prints_the_settings(orders, verbs, capsys):
    assert verbs("topic-settings", "--topic", "orders", "--json") == 0

    rows = json.loads(capsys.readouterr().out)["settings"]
    assert [r["name"] for r in rows] == ["retention_hours", "max_message_bytes", "dedup_window_s"]
    assert all(r["own"] is None and r["value"] == r["default"] for r in rows)


def test_json_settings_are_the_api_s_with_their_names(orders, verbs, capsys, as_viewer):
    assert verbs("topic-settings", "--topic", "orders", "--json") == 0

    rows = json.loads(capsys.readouterr().out)["settings"]
    api = as_viewer.get("/api/v1/topics/orders/settings/").json()
    assert {r.pop("name"): r for r in rows} == {k: v for k, v in api.items() if k != "topic"}


def test_flags_set_the_settings_and_the_change_is_audited(orders, verbs, capsys):
    code = verbs(
        "topic-settings",
        "--topic",
        "orders",
        "--retention-hours",
        "24",
        "--dedup-window-s",
        "0",
        "--as",
        "ops-anna",
    )

    assert code == 0
    assert get_store().topic("orders").settings == {"retention_hours": 24, "dedup_window_s": 0}
    entry = AuditEntry.objects.get(action="topic.settings")
    assert entry.username == "cli:ops-anna"
    assert entry.after == {"retention_hours": 24, "dedup_window_s": 0}
    assert "retention_hours" in capsys.readouterr().out


def test_default_puts_a_setting_back(orders, verbs):
    get_store().set_topic_settings("orders", {"max_message_bytes": 100})

    assert verbs("topic-settings", "--topic", "orders", "--max-message-bytes", "default") == 0

    assert get_store().topic("orders").settings == {}


@pytest.mark.parametrize("value", ["0", "lots", "87601"])
def test_a_bad_value_is_a_usage_error(orders, verbs, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        verbs("topic-settings", "--topic", "orders", "--retention-hours", value)

    assert exit_.value.code == 2
    assert "retention-hours" in capsys.readouterr().err
    assert get_store().topic("orders").settings == {}


def test_an_unknown_topic_is_one_sentence(orders, verbs, capsys):
    assert verbs("topic-settings", "--topic", "nope", "--retention-hours", "5") == 3

    assert "does not exist" in capsys.readouterr().err
