"""Every URL of the console, tried as users in scoped roles (rules on named topics and
groups, issue 32 item 8), for every method the access table lists.

What each URL asks of a topic or group is written here (``RESOURCE``), apart from the
console's own table (console/accounts/permissions.py), and each scoped user's expected
answer is worked out from their rules with ``fnmatch``: allowed, the answer is not a
refusal nor a 5xx; refused, a page answers 403 and the API 403, and nothing changes. URLs
that name no topic or group need what the access table says, and a scoped user is a
viewer there.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from tests.conftest import logged_in
from tests.security.access_table import (
    ACCESS,
    ALL_METHODS,
    LEVELS,
    VIEWER,
    sample_url,
    send,
    snapshot,
)
from tests.security.test_access import allowed_problem, denial_problem

pytestmark = pytest.mark.django_db

#: Scoped users: their role's rules as (kind, pattern, actions).
SCOPED = {
    "team_orders": [
        ("topic", "ord*", {"view", "read", "produce"}),
        ("group", "billing", {"view", "reset"}),
    ],
    "team_accounts": [
        ("topic", "acc[a-z]*", {"view", "read"}),
        ("group", "other-*", {"view", "read", "reset", "redrive", "manage"}),
    ],
    "team_managers": [
        ("topic", "*", {"view", "manage"}),
        ("group", "bill*", {"view", "read", "redrive", "manage"}),
    ],
}

T, G = "topic", "group"
#: (pattern name, method) → what it needs: [(kind, any of these actions, name or None)]; a
#: None name (the sample URL names none) needs the action on some topic or group.
RESOURCE: dict[tuple[str, str], list[tuple[str, set[str], str | None]]] = {}


def needs(key: str, methods: str, *parts: tuple[str, str, str | None]) -> None:
    for method in methods.split():
        RESOURCE[(key, method)] = [
            (kind, set(actions.split("|")), name) for kind, actions, name in parts
        ]


needs("topics:list", "POST", (T, "manage", None))
needs("topics:detail", "GET HEAD", (T, "view", "orders"))
# The selected topics (groups) are posted, not in the sample URL: the view checks each.
needs("topics:delete_selected", "GET HEAD POST", (T, "manage", None))
needs("topics:detail", "POST", (T, "produce|manage", "orders"))
for key in ("messages:search", "messages:export", "streams:stream"):
    needs(key, "GET HEAD", (T, "read", None))
needs("messages:detail", "GET HEAD", (T, "read", "orders"))
needs("messages:body", "GET HEAD", (T, "read", "orders"))
needs("groups:detail", "GET HEAD", (G, "view", "billing"))
for key in ("groups:reset_preview", "groups:reset_apply", "groups:reset_again"):
    needs(key, "GET HEAD POST", (G, "reset", "billing"))
needs("groups:reset_selected", "GET HEAD POST", (G, "reset", None))
needs("groups:resets", "GET HEAD", (G, "view", "billing"))
needs("groups:reset_undo", "GET HEAD", (G, "reset", "billing"))
needs("groups:dlq", "GET HEAD", (G, "read", "billing"))
needs("groups:dlq", "POST", (G, "redrive", "billing"))
needs("groups:delete", "GET HEAD POST", (G, "manage", "billing"))
# The store-wide history chart (its sample is the dashboard's) needs every topic and group.
needs("monitoring:chart", "GET HEAD", (T, "view", "*"), (G, "view", "*"))
needs("api-topics", "POST", (T, "manage", None))
needs("api-topics-delete-selected", "POST", (T, "manage", None))
for key in ("api-topic", "api-queues", "api-queue", "api-topic-settings"):
    needs(key, "GET HEAD", (T, "view", "orders"))
needs("api-topic", "DELETE", (T, "manage", "orders"))
needs("api-queues", "POST", (T, "manage", "orders"))
needs("api-queue", "DELETE", (T, "manage", "orders"))
needs("api-topic-settings", "PATCH", (T, "produce", "orders"))
for key in ("api-queue-freeze", "api-queue-unfreeze", "api-topic-messages"):
    needs(key, "POST", (T, "produce", "orders"))
needs("api-stream-events", "GET HEAD", (T, "read", "accounts"))
needs("api-stream-events", "POST", (T, "produce", "accounts"))
needs("api-queue-messages", "GET HEAD", (T, "read", "orders"))
needs("api-queue-commit", "POST", (T, "read", "orders"), (G, "reset", None))
needs("api-messages", "GET HEAD", (T, "read", None))
needs("api-messages-export", "GET HEAD", (T, "read", None))
needs("api-message", "GET HEAD", (T, "read", "orders"))
needs("api-message-consumption", "GET HEAD", (T, "read", "orders"))
needs("topics:tail", "GET HEAD", (T, "read", "orders"))
needs("api-topic-tail", "GET HEAD", (T, "read", "orders"))
needs("api-topic-tail-export", "GET HEAD", (T, "read", "orders"))
needs("api-topic-filter", "GET HEAD", (T, "read", "orders"))
needs("api-topic-filter-export", "GET HEAD", (T, "read", "orders"))
needs("api-group", "GET HEAD", (G, "view", "billing"))
needs("api-group", "DELETE", (G, "manage", "billing"))
needs("api-group-reset", "POST", (G, "reset", "billing"))
needs("api-selected-groups-reset", "POST", (G, "reset", None))
for key in ("api-group-resets", "api-group-reset-detail", "api-group-history"):
    needs(key, "GET HEAD", (G, "view", "billing"))
needs("api-group-reset-undo", "POST", (G, "reset", "billing"))
needs("api-group-dlq", "GET HEAD", (G, "read", "billing"))
needs("api-group-dlq", "DELETE", (G, "redrive", "billing"))
needs("api-group-dlq-redrive", "POST", (G, "redrive", "billing"))


def allowed(client_name: str, key: str, method: str) -> bool:
    rules = SCOPED[client_name]
    parts = RESOURCE.get((key, method))
    if parts is None:
        return LEVELS.index(ACCESS[key].methods[method]) <= LEVELS.index(VIEWER)
    return all(
        any(
            kind == rule_kind
            and actions & rule_actions
            and (name is None or fnmatchcase(name, pattern))
            for rule_kind, pattern, rule_actions in rules
        )
        for kind, actions, name in parts
    )


@pytest.fixture
def scoped_clients(world, django_user_model):
    from django.contrib.auth.models import Group

    from console.accounts.models import RoleRule

    made = {}
    for name, rules in SCOPED.items():
        role = Group.objects.create(name=f"role-{name}")
        for kind, pattern, actions in rules:
            RoleRule.objects.create(role=role, kind=kind, pattern=pattern, actions=sorted(actions))
        user = django_user_model.objects.create_user(username=name, password=None)
        user.groups.add(role)
        made[name] = logged_in(user)
    return made


def test_every_resource_need_written_here_is_a_method_of_the_access_table():
    unknown = [
        f"{key} {method}"
        for key, method in RESOURCE
        if key not in ACCESS or method not in ACCESS[key].methods
    ]

    assert not unknown, unknown


def needs_a_role(key: str) -> bool:
    """Whether every method of the URL needs a role (public URLs, and those open to any
    logged-in user, are the access table's own test's)."""
    lowest = min(ACCESS[key].methods.values(), key=LEVELS.index)
    return LEVELS.index(lowest) >= LEVELS.index(VIEWER)


@pytest.mark.parametrize("key", [key for key in ACCESS if needs_a_role(key)])
def test_each_scoped_role_gets_what_its_rules_allow(key, scoped_clients, world, store):
    rule = ACCESS[key]
    url = sample_url(key, rule, world)
    problems = []
    state = snapshot(store)
    # Refusals first (nothing may change), then what is allowed, DELETE last.
    order = sorted(
        ((m, c) for m in ALL_METHODS if m in rule.methods for c in SCOPED),
        key=lambda mc: (allowed(mc[1], key, mc[0]), mc[0] == "DELETE"),
    )
    for method, client_name in order:
        expect = allowed(client_name, key, method)
        response = send(scoped_clients[client_name], method, url)
        after = snapshot(store)
        if expect:
            problem = allowed_problem(rule, method, response)
        else:
            problem = denial_problem(rule.kind, client_name, response)
            if after != state:
                problem = f"{problem or response.status_code}, and it changed something"
        if problem:
            problems.append(
                f"{method} as {client_name} ({'allowed' if expect else 'refused'}): {problem}"
            )
        state = after

    assert not problems, f"{url}: " + "; ".join(problems)
