"""Hostile topic, group and message names, through every page and endpoint taking one.

Path traversal, absolute paths, NUL bytes, unicode tricks and 10 KB strings: each is
refused with a clear 4xx or a form error (never a 500), creates no topic or group, and no
file appears outside the store's directory.

Each test sends every name through one way in and reports all the names that got through,
so a case is one door, not one name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib.messages import get_messages
from rest_framework.test import APIClient

from console.accounts.models import ApiToken
from tests.security.access_table import snapshot

pytestmark = pytest.mark.django_db

HOSTILE_NAMES = {
    "parent": "..",
    "dot": ".",
    "traversal": "../evil",
    "deep traversal": "../../../../etc/passwd",
    "encoded traversal": "..%2fevil",
    "backslash traversal": "..\\evil",
    "absolute": "/tmp/tidemark-evil",
    "slash": "a/b",
    "NUL": "evil\x00name",
    "NUL alone": "\x00",
    "newline": "evil\nname",
    "RTL override": "txt.\u202eexe",
    "homoglyph": "\u043erders",  # Cyrillic o
    "combining": "orde\u0301rs",
    "fullwidth (NFKC: orders)": "\uff4f\uff52\uff44\uff45\uff52\uff53",
    "zero-width": "or\u200bders",
    "BOM": "\ufefforders",
    "10 KB": "a" * 10_240,
    "spaces": "   ",
    "retry prefix traversal": "%RETRY%../evil",
}


@pytest.fixture
def outside(tmp_path: Path):
    """Every file and folder next to the store, before; call it to get them after."""

    def entries() -> set[str]:
        return {
            str(p.relative_to(tmp_path))
            for p in tmp_path.rglob("*")
            if p.relative_to(tmp_path).parts[0] != "store"
        }

    before = entries()
    return lambda: entries() - before


@pytest.fixture
def token_client(admin) -> APIClient:
    _, key = ApiToken.issue(admin, "hostile names")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def in_path(name: str) -> str:
    return quote(name, safe="")


def page_refused(response) -> bool:
    """A 4xx, a form shown again with its errors, or a redirect carrying an error message."""
    if 400 <= response.status_code < 500:
        return True
    context = response.context or {}
    form = None
    if hasattr(context, "get"):
        form = context.get("form") or context.get("reset_form")
    if response.status_code == 200 and form is not None and form.errors:
        return True
    return response.status_code == 302 and any(
        message.level_tag == "error" for message in get_messages(response.wsgi_request)
    )


def api_refused(response) -> bool:
    if not 400 <= response.status_code < 500:
        return False
    body = response.json()
    return set(body) == {"error"} and bool(body["error"]["message"])


DOORS: dict[str, Any] = {
    "page: create a topic": lambda c, n: c["page"].post("/topics/", {"name": n, "queues": 1}),
    "page: topic page": lambda c, n: c["page"].get(f"/topics/{in_path(n)}/"),
    "page: group page": lambda c, n: c["page"].get(f"/groups/{in_path(n)}/"),
    "page: reset a group's offsets": lambda c, n: c["page"].post(
        f"/groups/{in_path(n)}/reset/preview/", {"topic": "orders", "mode": "latest"}
    ),
    "page: copy offsets from a group": lambda c, n: c["page"].post(
        "/groups/billing/reset/preview/", {"topic": "orders", "mode": "group", "source": n}
    ),
    "page: message page": lambda c, n: c["page"].get(f"/messages/{in_path(n)}/"),
    "page: message body": lambda c, n: c["page"].get(f"/messages/{in_path(n)}/body"),
    "page: message search": lambda c, n: c["page"].get(
        "/messages/?" + urlencode({"mode": "key", "topic": n, "key": "k1"})
    ),
    "page: topic chart": lambda c, n: c["page"].get(
        "/monitoring/charts/topic/?" + urlencode({"topic": n})
    ),
    "api: create a topic": lambda c, n: c["api"].post(
        "/api/v1/topics/", {"name": n, "queues": 1}, format="json"
    ),
    "api: topic": lambda c, n: c["api"].get(f"/api/v1/topics/{in_path(n)}/"),
    "api: group": lambda c, n: c["api"].get(f"/api/v1/groups/{in_path(n)}/"),
    "api: commit as a group": lambda c, n: c["api"].post(
        "/api/v1/topics/orders/queues/0/commit/", {"group": n, "offset": 0}, format="json"
    ),
    "api: copy offsets from a group": lambda c, n: c["api"].post(
        "/api/v1/groups/newgroup/reset/",
        {"topic": "orders", "mode": "group", "source": n},
        format="json",
    ),
    "api: produce to a topic": lambda c, n: c["api"].post(
        f"/api/v1/topics/{in_path(n)}/messages/", {"body": "x"}, format="json"
    ),
    "api: message": lambda c, n: c["api"].get(f"/api/v1/messages/{in_path(n)}/"),
    "api: message search": lambda c, n: c["api"].get(
        "/api/v1/messages/?" + urlencode({"topic": n, "key": "k1"})
    ),
}

#: Doors that only read: any non-5xx answer is fine as long as nothing changes.
READ_ONLY = {"page: topic chart"}


@pytest.mark.parametrize("door", list(DOORS))
def test_hostile_names_are_refused_and_touch_nothing(
    door, world, store, as_admin, token_client, outside
):
    clients = {"page": as_admin, "api": token_client}
    before = snapshot(store)
    problems = []
    for label, name in HOSTILE_NAMES.items():
        response = DOORS[door](clients, name)
        if response.status_code >= 500:
            problems.append(f"{label}: {response.status_code}")
        elif door in READ_ONLY:
            pass
        elif door.startswith("api") and not api_refused(response):
            problems.append(f"{label}: {response.status_code} {response.content[:120]!r}")
        elif door.startswith("page") and not page_refused(response):
            problems.append(f"{label}: {response.status_code}")

    assert not problems, f"{door}: " + "; ".join(problems)
    assert snapshot(store) == before
    assert outside() == set()
    assert not Path("/tmp/tidemark-evil").exists()


RAW_PATHS = [
    "/topics/%ff/",
    "/topics/%00/",
    "/topics/%2e%2e/",
    "/topics/..%2f..%2fetc/",
    "/groups/%C0%AE%C0%AE/",
    "/messages/%ff%fe/",
    "/messages/%2e%2e%2f%2e%2e/body",
    "/api/v1/topics/%ff/",
    "/api/v1/topics/%00/",
    "/api/v1/groups/%2e%2e/",
    "/api/v1/messages/%ff/",
    "/%ff",
]


@pytest.mark.parametrize("path", RAW_PATHS)
def test_broken_encodings_in_the_path_are_a_4xx_or_login(path, world, as_admin, client):
    statuses = {"anonymous": client.get(path).status_code, "admin": as_admin.get(path).status_code}

    assert all(status in (302, 400, 401, 404) for status in statuses.values()), statuses
