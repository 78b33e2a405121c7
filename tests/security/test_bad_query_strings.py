"""Every readable page and endpoint, with every query parameter it might read set to
nonsense: never a 500. (Wrong values are ignored or refused with a 4xx.)"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.security.access_table import ACCESS, sample_url

pytestmark = pytest.mark.django_db

#: The query parameters the console's pages and endpoints read, gathered from their code.
PARAMETERS = (
    "page",
    "page_size",
    "limit",
    "offset",
    "q",
    "sort",
    "range",
    "view",
    "mode",
    "id",
    "topic",
    "group",
    "queue",
    "from",
    "to",
    "at",
    "since",
    "until",
    "key",
    "tag",
    "kind",
    "state",
    "status",
    "action",
    "user",
    "count",
    "max",
    "wait",
    "format",
    "next",
)

BAD_VALUES = {
    "empty": "",
    "negative": "-1",
    "word": "abc",
    "huge number": "9" * 40,
    "float overflow": "1e309",
    "NUL": "a\x00b",
    "markup": "<script>x</script>",
    "10 KB": "z" * 10_240,
    "bad date": "2024-13-45T25:61:61",
}

READABLE = [key for key, rule in ACCESS.items() if "GET" in rule.methods]

#: Searches whose mode or subject must be valid before the other parameters are read:
#: (path, the parameters kept valid); every other parameter gets the nonsense.
SEARCHES = {
    "page search by id": ("/messages/", {"mode": "id"}),
    "page search by key": ("/messages/", {"mode": "key", "topic": "orders"}),
    "page search by range": ("/messages/", {"mode": "range", "topic": "orders"}),
    "page search by time": ("/messages/", {"mode": "time", "topic": "orders"}),
    "export by key": ("/messages/export/", {"mode": "key", "topic": "orders"}),
    "export by range": ("/messages/export/", {"mode": "range", "topic": "orders", "queue": "0"}),
    "api search by topic": ("/api/v1/messages/", {"topic": "orders"}),
    "api search by key": ("/api/v1/messages/", {"topic": "orders", "key": "k1"}),
    "api export": ("/api/v1/messages/export/", {"topic": "orders"}),
    "api pull": ("/api/v1/topics/orders/queues/0/messages/", {}),
    "api pull as a group": ("/api/v1/topics/orders/queues/0/messages/", {"group": "billing"}),
    "topic chart": ("/monitoring/charts/topic/", {"topic": "orders"}),
    "topic history chart": ("/monitoring/charts/topic-history/", {"topic": "orders"}),
    "group chart": ("/monitoring/charts/group/", {"group": "billing"}),
    "message view": ("/messages/{message_id}/", {}),
}


def failures_of(client, path: str, fixed: dict[str, str]) -> dict[str, int]:
    """The nonsense values that got a 5xx, with the status."""
    failures = {}
    for label, value in BAD_VALUES.items():
        query = {name: value for name in PARAMETERS if name not in fixed}
        status = client.get(path + "?" + urlencode({**query, **fixed})).status_code
        if status >= 500:
            failures[label] = status
    return failures


@pytest.mark.parametrize("key", READABLE)
def test_nonsense_query_parameters_are_never_a_500(key, world, as_admin):
    rule = ACCESS[key]
    path = sample_url(key, rule, world).split("?")[0]

    failures = {k: v for k, v in failures_of(as_admin, path, {}).items() if v not in rule.also_ok}

    assert not failures, f"{path}: {failures}"


@pytest.mark.parametrize("search", list(SEARCHES))
def test_nonsense_around_a_valid_search_is_never_a_500(search, world, as_admin):
    path, fixed = SEARCHES[search]

    failures = failures_of(as_admin, path.format(**world), fixed)

    assert not failures, f"{search}: {failures}"
