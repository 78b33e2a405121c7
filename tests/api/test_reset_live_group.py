"""An offset reset and its undo through the API on a group whose consumer is running: the
project's own Consumer commits several times a second throughout."""

from __future__ import annotations

import time

import pytest

from console.core.store import store_config
from tests.livegroup import CONSUMER_ID, LiveGroup, wait_until

pytestmark = pytest.mark.django_db

RESET = "/api/v1/groups/billing/reset/"


@pytest.fixture
def live(store):
    store.create_topic("orders", 2)
    store.append_batch("orders", [{"body": f"old {n}", "queue": n % 2} for n in range(40)])
    with LiveGroup(store, store_config(), "billing", "orders", queues=2) as group:
        yield group


def post(client, url, data=None):
    response = client.post(url, data or {}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_reset_and_its_undo_by_id_are_applied_while_the_consumer_commits(as_operator, live):
    store = live.store
    token = post(as_operator, RESET, {"topic": "orders", "mode": "earliest"})["token"]
    time.sleep(3)  # the operator reads the preview; the consumer commits meanwhile

    applied = post(as_operator, RESET, {"dry_run": False, "plan": token})

    assert applied["changed"] == 2
    assert all(c["new"] == 0 and c["old"] > 0 for c in applied["changes"])
    before = {c["queue"]: c["old"] for c in applied["changes"]}
    reset_ms = max(c["time_ms"] for c in applied["changes"])
    wait_until(lambda: live.commits_after(reset_ms) >= 200, what="200 commits after the reset")
    history = list(reversed(store.offset_history("billing", limit=1000)))  # oldest first
    # After the reset's own changes in the history's order (a consumer commit of the same
    # millisecond may come before them).
    last_reset = max(i for i, c in enumerate(history) if c.who != CONSUMER_ID)
    first_commits = {}
    for change in history[last_reset + 1 :]:
        if change.who == CONSUMER_ID:
            first_commits.setdefault(change.queue, change.old)
    assert first_commits == {0: 0, 1: 0}  # the consumer went on from the reset, not over it

    undo_url = f"/api/v1/groups/billing/resets/{applied['reset_id']}/undo/"
    undo = post(as_operator, undo_url)
    assert {q["queue"]: q["target"] for q in undo["queues"]} == before
    undone = post(as_operator, undo_url, {"dry_run": False, "plan": undo["token"]})

    assert undone["mode"] == "undo" and undone["changed"] >= 1
    # A queue the consumer had brought back to where it was moves no more.
    assert all(c["new"] == before[c["queue"]] for c in undone["changes"])
