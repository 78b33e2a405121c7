"""/api/v1/groups/: the list, one group's lag and members, delete and history.

Resets and undos are in test_group_reset_api.py, dead letters in test_group_dlq_api.py.
"""

from __future__ import annotations

import pytest

from console.accounts.roles import ensure_role_groups
from console.audit.models import AuditEntry
from storeadapter.engine.membership import heartbeat
from storeadapter.offset_reset import apply_reset, preview_reset, reset_reason
from tests.api.apitools import error_of, expected_status
from tests.worlds import billing_on_orders

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
URL = "/api/v1/groups/billing/"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): at 2 on queue 0, 5 on queue 1."""
    return billing_on_orders(store, committed=(2, 5), who=("worker-1", "worker-2"))


def post(client, url, data=None):
    return client.post(url, data, format="json")


# Roles


@pytest.mark.parametrize("who", CLIENTS)
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/groups/",
        URL,
        URL + "history/",
        URL + "dlq/",
    ],
)
def test_reading_groups_needs_viewer(clients, billing, who, url):
    assert clients[who].get(url).status_code == expected_status(who, "viewer", 200)


@pytest.mark.parametrize("who", CLIENTS)
def test_deleting_a_group_needs_admin(clients, billing, who):
    response = clients[who].delete(URL)

    assert response.status_code == expected_status(who, "admin", 204)
    assert ("billing" in billing.groups()) == (who != "admin")


# List


def test_the_list_has_lag_topics_queues_behind_and_members(as_viewer, billing):
    billing.create_topic("payments", 1)
    billing.append("payments", b"p")
    billing.commit_offset("billing", "payments", 0, 0)
    heartbeat(billing.path, "billing", "worker-1", ["orders"], queues=[("orders", 0)])

    body = as_viewer.get("/api/v1/groups/").json()

    assert body["count"] == 1
    assert body["results"] == [
        {
            "group": "billing",
            "lag": 4,
            "topics": ["orders", "payments"],
            "queues_behind": 2,
            "members": 1,
            "status": None,  # no metrics sample yet
        }
    ]


def test_the_list_and_detail_carry_the_sampled_status(as_viewer, billing):
    from console.monitoring import current
    from console.monitoring.sampler import take_sample

    current._cache.update(token=None, groups=None)
    take_sample()

    listed = as_viewer.get("/api/v1/groups/").json()["results"][0]
    detail = as_viewer.get("/api/v1/groups/billing/").json()

    assert listed["status"] == detail["status"] == detail["metrics"]["status"]
    assert detail["status"] in ("OK", "WARN", "ERR")
    assert all(q["status"] is not None for q in detail["queues"])


def test_the_list_is_most_behind_first(as_viewer, billing):
    billing.commit_offset("far-behind", "orders", 0, 0)
    billing.commit_offset("caught-up", "orders", 0, 5)
    billing.commit_offset("caught-up", "orders", 1, 5)

    results = as_viewer.get("/api/v1/groups/").json()["results"]

    assert [(g["group"], g["lag"]) for g in results] == [
        ("far-behind", 10),
        ("billing", 3),
        ("caught-up", 0),
    ]


def test_the_list_filters_by_name(as_viewer, billing):
    billing.commit_offset("audit-trail", "orders", 0, 0)

    results = as_viewer.get("/api/v1/groups/", {"q": "BILL"}).json()["results"]

    assert [g["group"] for g in results] == ["billing"]


def test_the_list_filters_by_topic(as_viewer, billing):
    billing.create_topic("payments", 1)
    billing.commit_offset("payer", "payments", 0, 0)

    results = as_viewer.get("/api/v1/groups/", {"topic": "payments"}).json()["results"]

    assert [g["group"] for g in results] == ["payer"]


def test_the_list_is_paged(as_viewer, billing):
    for n in range(3):
        billing.commit_offset(f"g{n}", "orders", 0, 5)

    body = as_viewer.get("/api/v1/groups/", {"page_size": 2, "page": 2}).json()

    assert body["count"] == 4
    assert len(body["results"]) == 2
    assert body["next"] is None
    assert body["previous"] is not None


def test_an_unknown_list_parameter_is_400(as_viewer, billing):
    response = as_viewer.get("/api/v1/groups/", {"sort": "lag"})

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"


# Detail


def test_the_detail_has_each_queue_with_owner_and_last_commit(as_viewer, billing):
    heartbeat(billing.path, "billing", "worker-1", ["orders"], queues=[("orders", 0)])

    body = as_viewer.get(URL).json()

    assert body["group"] == "billing"
    assert body["lag"] == 3
    assert body["topics"] == ["orders"]
    assert body["has_dlq"] is False
    rows = [
        (q["topic"], q["queue"], q["committed"], q["max_offset"], q["lag"], q["owner"])
        for q in body["queues"]
    ]
    assert rows == [("orders", 0, 2, 5, 3, "worker-1"), ("orders", 1, 5, 5, 0, None)]
    assert all(isinstance(q["last_commit_ms"], int) for q in body["queues"])


def test_the_detail_lists_the_members_and_their_queues(as_viewer, billing):
    heartbeat(billing.path, "billing", "worker-1", ["orders"], queues=[("orders", 0)])

    (member,) = as_viewer.get(URL).json()["members"]

    assert member["consumer_id"] == "worker-1"
    assert member["topics"] == ["orders"]
    assert member["queues"] == [{"topic": "orders", "queue": 0}]
    assert member["heartbeat_age_ms"] >= 0


def test_the_detail_shows_the_same_rows_as_the_page(as_viewer, billing, client, django_user_model):

    user = django_user_model.objects.create_user("pagey", password=None)
    user.groups.add(ensure_role_groups()["viewer"])
    client.force_login(user)
    (table,) = client.get("/groups/billing/").context["topic_tables"]

    api_rows = as_viewer.get(URL).json()["queues"]

    assert [(r.queue, r.committed, r.lag, r.last_commit_ms) for r in table["rows"]] == [
        (q["queue"], q["committed"], q["lag"], q["last_commit_ms"]) for q in api_rows
    ]


@pytest.mark.parametrize(
    "url",
    [URL.replace("billing", "nobody-here"), "/api/v1/groups/nobody-here/history/"],
)
def test_an_unknown_group_is_404(as_viewer, billing, url):
    response = as_viewer.get(url)

    assert response.status_code == 404
    assert error_of(response)["code"] == "group_not_found"


def test_deleting_a_group_forgets_it_and_is_audited(as_admin, billing):
    response = as_admin.delete(URL)

    assert response.status_code == 204
    assert "billing" not in billing.groups()
    entry = AuditEntry.objects.get(action="group.delete")
    assert (entry.username, entry.target) == ("ada", "group billing")


def test_deleting_an_unknown_group_is_404(as_admin, billing):
    response = as_admin.delete("/api/v1/groups/nobody-here/")

    assert response.status_code == 404
    assert error_of(response)["code"] == "group_not_found"
    assert not AuditEntry.objects.exists()


# History


def test_the_history_is_newest_first_with_who_and_reason(as_viewer, billing):
    billing.commit_offset("billing", "orders", 0, 4, who="worker-1")

    body = as_viewer.get(URL + "history/").json()

    assert body["count"] == 3
    assert [(h["who"], h["queue"], h["old"], h["new"]) for h in body["results"]] == [
        ("worker-1", 0, 2, 4),
        ("worker-2", 1, None, 5),
        ("worker-1", 0, None, 2),
    ]
    first = body["results"][0]
    assert first["topic"] == "orders"
    assert first["reason"] == first["label"] == "commit"
    assert isinstance(first["time_ms"], int)
    assert first["reset_id"] is None


def test_the_history_names_the_reset_a_change_was_part_of(as_viewer, billing):
    plan = preview_reset(billing, "billing", "orders", "earliest")
    apply_reset(billing, plan, who="otto", reason=reset_reason(7, "earliest"))

    results = as_viewer.get(URL + "history/").json()["results"]

    resets = [h for h in results if h["who"] == "otto"]
    assert [(h["label"], h["reset_id"]) for h in resets] == [("reset to earliest", 7)] * 2
    assert not any(h["reset_id"] for h in results if h["who"] != "otto")


def test_the_history_filters_by_topic_and_queue(as_viewer, billing):
    billing.create_topic("payments", 1)
    billing.commit_offset("billing", "payments", 0, 0)

    by_topic = as_viewer.get(URL + "history/", {"topic": "payments"}).json()["results"]
    by_queue = as_viewer.get(URL + "history/", {"topic": "orders", "queue": 1}).json()["results"]

    assert [(h["topic"], h["queue"]) for h in by_topic] == [("payments", 0)]
    assert [(h["topic"], h["queue"]) for h in by_queue] == [("orders", 1)]


def test_the_history_is_paged(as_viewer, billing):
    for offset in range(3, 6):
        billing.commit_offset("billing", "orders", 0, offset)

    body = as_viewer.get(URL + "history/", {"page_size": 2}).json()

    assert body["count"] == 5
    assert [h["new"] for h in body["results"]] == [5, 4]


def test_a_bad_history_queue_is_400(as_viewer, billing):
    response = as_viewer.get(URL + "history/", {"queue": "first"})

    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"
