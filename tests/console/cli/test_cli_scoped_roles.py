"""The group verbs of the ``tidemark`` command obey the roles of the console user they act
as (``--as``); ``cli:<name>``, no console user, is the machine's operator."""

from __future__ import annotations

import argparse
import json

import pytest
from django.contrib.auth.models import Group

from console.accounts.models import RoleRule
from console.cli import operator_verbs

pytestmark = pytest.mark.django_db


@pytest.fixture
def verbs():
    parser = argparse.ArgumentParser()
    handlers = operator_verbs.add_commands(parser.add_subparsers(dest="verb"))

    def run(*args: str) -> int:
        parsed = parser.parse_args(args)
        return handlers[parsed.verb](parsed)

    return run


@pytest.fixture
def groups(store):
    store.create_topic("orders", 1)
    store.append("orders", b"m", queue=0)
    store.commit_offset("billing", "orders", 0, 1)
    store.commit_offset("shipping", "orders", 0, 0)


@pytest.fixture
def bea(django_user_model):
    role = Group.objects.create(name="team-billing")
    RoleRule.objects.create(role=role, kind="group", pattern="billing", actions=["view"])
    user = django_user_model.objects.create_user(username="bea", password=None)
    user.groups.add(role)
    return user


def test_groups_lists_only_the_groups_the_user_may_view(groups, bea, verbs, capsys):
    assert verbs("groups", "--as", "bea", "--json") == 0

    assert [row["group"] for row in json.loads(capsys.readouterr().out)] == ["billing"]


def test_a_reset_the_users_roles_do_not_allow_exits_4_and_changes_nothing(
    groups, bea, verbs, store, capsys
):
    code = verbs(
        "reset-offsets",
        "--group",
        "billing",
        "--topic",
        "orders",
        "--to-earliest",
        "--execute",
        "--as",
        "bea",
    )

    assert code == operator_verbs.EXIT_NOT_ALLOWED
    assert "bea's roles do not allow them to reset the group 'billing'" in capsys.readouterr().err
    from console.core.store import get_store  # the verb closed the stores it opened

    assert get_store().committed_offset("billing", "orders", 0) == 1


def test_a_machine_user_who_is_no_console_user_is_not_restricted(groups, verbs, capsys):
    assert verbs("groups", "--as", "ops-anna", "--json") == 0

    assert {row["group"] for row in json.loads(capsys.readouterr().out)} == {"billing", "shipping"}
