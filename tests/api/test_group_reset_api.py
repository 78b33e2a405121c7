"""/api/v1/groups/<group>/reset/ and undo/: previewed (dry_run), applied only as previewed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.api.models import PREVIEW_LIFETIME, ResetPreview
from console.audit.models import AuditEntry
from storeadapter.offset_reset import HISTORY_KEPT, LISTED_QUEUES, ResetPlan
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
RESET = "/api/v1/groups/billing/reset/"
UNDO = "/api/v1/groups/billing/undo/"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): at 2 on queue 0, 5 on queue 1."""
    store.create_topic("orders", 2)
    for queue in (0, 1):
        for n in range(5):
            store.append("orders", f"m{n}".encode(), queue=queue)
    store.commit_offset("billing", "orders", 0, 2)
    store.commit_offset("billing", "orders", 1, 5)
    return store


def post(client, url, data=None):
    return client.post(url, data, format="json")


def offsets(store) -> list[int | None]:
    return [store.committed_offset("billing", "orders", q) for q in (0, 1)]


def preview(client, url=RESET, **data) -> dict:
    response = post(client, url, data or {"topic": "orders", "mode": "earliest"})
    assert response.status_code == 200, response.json()
    return response.json()


def apply(client, token: str, url=RESET):
    return post(client, url, {"dry_run": False, "plan": token})


# Roles


@pytest.mark.parametrize("who", CLIENTS)
def test_previewing_a_reset_needs_operator_and_changes_nothing(clients, billing, who):
    response = post(clients[who], RESET, {"topic": "orders", "mode": "earliest"})

    assert response.status_code == expected_status(who, "operator", 200)
    assert offsets(billing) == [2, 5]


@pytest.mark.parametrize("who", CLIENTS)
def test_applying_a_reset_needs_operator(clients, as_admin, billing, who):
    token = preview(as_admin)["token"]

    response = apply(clients[who], token)

    assert response.status_code == expected_status(who, "operator", 200)
    assert offsets(billing) == ([0, 0] if who in ("operator", "admin") else [2, 5])


@pytest.mark.parametrize("who", CLIENTS)
def test_undoing_needs_operator(clients, as_admin, billing, who):
    apply(as_admin, preview(as_admin)["token"])
    token = preview(as_admin, UNDO, topic="orders")["token"]

    response = apply(clients[who], token, UNDO)

    assert response.status_code == expected_status(who, "operator", 200)
    assert offsets(billing) == ([2, 5] if who in ("operator", "admin") else [0, 0])


# Preview


def test_a_preview_says_per_queue_what_would_happen_and_is_saved(as_operator, billing):
    body = preview(as_operator)

    assert (body["group"], body["topic"], body["mode"], body["value"]) == (
        "billing",
        "orders",
        "earliest",
        None,
    )
    assert [
        (q["queue"], q["committed"], q["current"], q["target"], q["consumed_again"], q["skipped"])
        for q in body["queues"]
    ] == [(0, 2, 2, 0, 2, 0), (1, 5, 5, 0, 5, 0)]
    assert (body["changes"], body["consumed_again"], body["skipped"]) == (2, 7, 0)
    assert body["span_from_ms"] is not None
    saved = ResetPreview.objects.get(token=body["token"])
    assert saved.group == "billing"
    assert ResetPlan.from_dict(saved.plan).token == body["token"]
    assert body["expires_ms"] > body["span_to_ms"]


def test_the_preview_is_the_reset_plan(as_operator, billing):
    body = preview(as_operator)

    plan = ResetPlan.from_dict(ResetPreview.objects.get(token=body["token"]).plan)
    assert {k: v for k, v in body.items() if k in plan.as_dict()} == plan.as_dict()


@pytest.mark.parametrize(
    "data, targets",
    [
        ({"mode": "latest"}, [5, 5]),
        ({"mode": "time", "value": 0}, [0, 0]),
        ({"mode": "shift", "value": -1}, [1, 4]),
        ({"mode": "offset", "offsets": {"1": 3}}, [2, 3]),
    ],
)
def test_each_mode_previews_its_targets(as_operator, billing, data, targets):
    body = preview(as_operator, topic="orders", **data)

    assert [q["target"] for q in body["queues"]] == targets
    assert offsets(billing) == [2, 5]


def test_a_target_out_of_range_is_clamped_and_said_so(as_operator, billing):
    body = preview(as_operator, topic="orders", mode="shift", value=10)

    assert [q["target"] for q in body["queues"]] == [5, 5]
    assert "past the queue's end" in body["queues"][0]["clamped"]
    assert body["queues"][1]["clamped"] is not None


def test_previewing_the_same_reset_twice_gives_one_saved_preview(as_operator, billing):
    first = preview(as_operator)
    second = preview(as_operator)

    assert first["token"] == second["token"]
    assert ResetPreview.objects.count() == 1


# Apply


def test_applying_moves_the_offsets_and_is_audited(as_operator, billing):
    token = preview(as_operator)["token"]

    response = apply(as_operator, token)

    assert response.status_code == 200
    body = response.json()
    assert (body["mode"], body["token"], body["consumed_again"], body["skipped"]) == (
        "earliest",
        token,
        7,
        0,
    )
    assert [(c["queue"], c["old"], c["new"], c["who"]) for c in body["changes"]] == [
        (0, 2, 0, "otto"),
        (1, 5, 0, "otto"),
    ]
    assert offsets(billing) == [0, 0]
    entry = AuditEntry.objects.get(action="offset.reset")
    assert (entry.username, entry.target) == ("otto", "group billing topic orders")
    assert (entry.before, entry.after) == ({"0": 2, "1": 5}, {"0": 0, "1": 0})
    assert token in entry.detail


def test_a_preview_is_applied_once(as_operator, billing):
    token = preview(as_operator)["token"]
    apply(as_operator, token)

    response = apply(as_operator, token)

    assert response.status_code == 404
    assert error_of(response)["code"] == "preview_not_found"


def test_offsets_moved_since_the_preview_are_409_and_nothing_changes(as_operator, billing):
    token = preview(as_operator)["token"]
    billing.commit_offset("billing", "orders", 0, 3)

    response = apply(as_operator, token)

    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "offsets_moved"
    assert "preview the reset again" in error["message"]
    assert offsets(billing) == [3, 5]
    assert not AuditEntry.objects.exists()


def test_an_expired_preview_is_400(as_operator, billing):
    token = preview(as_operator)["token"]
    long_ago = timezone.now() - PREVIEW_LIFETIME - timedelta(seconds=1)
    ResetPreview.objects.filter(token=token).update(created_at=long_ago)

    response = apply(as_operator, token)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "preview_expired"
    assert "preview the reset again" in error["message"]
    assert offsets(billing) == [2, 5]


def test_an_unknown_token_is_404(as_operator, billing):
    response = apply(as_operator, "0123456789abcdef")

    assert response.status_code == 404
    assert "preview the reset again" in error_of(response)["message"]


def test_another_groups_token_is_404_here(as_operator, billing):
    billing.commit_offset("other", "orders", 0, 1)
    token = preview(as_operator, "/api/v1/groups/other/reset/", topic="orders", mode="latest")

    response = apply(as_operator, token["token"])

    assert response.status_code == 404
    assert billing.committed_offset("other", "orders", 0) == 1


def test_applying_without_a_plan_says_to_preview_first(as_operator, billing):
    response = post(as_operator, RESET, {"dry_run": False})

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "preview_required"
    assert "Preview the reset first" in error["message"]


def test_applying_takes_only_the_plan(as_operator, billing):
    token = preview(as_operator)["token"]

    response = post(
        as_operator, RESET, {"dry_run": False, "plan": token, "topic": "orders", "mode": "latest"}
    )

    assert response.status_code == 400
    assert set(error_of(response)["details"]["fields"]) == {"topic", "mode"}
    assert offsets(billing) == [2, 5]


def test_a_plan_with_dry_run_true_is_400(as_operator, billing):
    token = preview(as_operator)["token"]

    response = post(as_operator, RESET, {"topic": "orders", "mode": "latest", "plan": token})

    assert response.status_code == 400
    assert "plan" in error_of(response)["details"]["fields"]
    assert offsets(billing) == [2, 5]


# Bad input


@pytest.mark.parametrize(
    "data, field",
    [
        ({"topic": "orders"}, "mode"),
        ({"mode": "earliest"}, "topic"),
        ({"topic": "orders", "mode": "undo"}, "mode"),
        ({"topic": "orders", "mode": "sideways"}, "mode"),
        ({"topic": "orders", "mode": "time"}, "value"),
        ({"topic": "orders", "mode": "shift"}, "value"),
        ({"topic": "orders", "mode": "time", "value": -1}, "value"),
        ({"topic": "orders", "mode": "shift", "value": "5"}, "value"),
        ({"topic": "orders", "mode": "shift", "value": 1.5}, "value"),
        ({"topic": "orders", "mode": "shift", "value": 10**13}, "value"),
        ({"topic": "orders", "mode": "earliest", "value": 3}, "value"),
        ({"topic": "orders", "mode": "offset"}, "offsets"),
        ({"topic": "orders", "mode": "offset", "offsets": {}}, "offsets"),
        ({"topic": "orders", "mode": "offset", "offsets": {"first": 1}}, "offsets"),
        ({"topic": "orders", "mode": "offset", "offsets": {"0": -1}}, "offsets"),
        ({"topic": "orders", "mode": "offset", "offsets": {"0": "1"}}, "offsets"),
        ({"topic": "orders", "mode": "offset", "offsets": [1, 2]}, "offsets"),
        ({"topic": "orders", "mode": "latest", "offsets": {"0": 1}}, "offsets"),
        ({"topic": "orders", "mode": "latest", "dry_run": "no"}, "dry_run"),
        ({"topic": "bad name", "mode": "latest"}, "topic"),
        ({"topic": "orders", "mode": "latest", "force": True}, "force"),
        ({"dry_run": False, "plan": "not-a-token"}, "plan"),
    ],
)
def test_bad_reset_bodies_are_400_naming_the_field(as_operator, billing, data, field):
    response = post(as_operator, RESET, data)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["details"]["fields"]
    assert offsets(billing) == [2, 5]
    assert not ResetPreview.objects.exists()


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null"])
def test_a_body_that_is_not_an_object_is_400(as_operator, billing, body):
    response = as_operator.post(RESET, body, content_type="application/json")

    assert response.status_code == 400
    error_of(response)


def test_an_unknown_group_is_404(as_operator, billing):
    url = "/api/v1/groups/nobody-here/reset/"

    response = post(as_operator, url, {"topic": "orders", "mode": "latest"})

    assert response.status_code == 404
    assert error_of(response)["code"] == "group_not_found"


def test_an_unknown_topic_is_404(as_operator, billing):
    response = post(as_operator, RESET, {"topic": "nope", "mode": "latest"})

    assert response.status_code == 404
    assert error_of(response)["code"] == "topic_not_found"


def test_a_topic_the_group_never_consumed_is_404(as_operator, billing):
    billing.create_topic("payments", 1)

    response = post(as_operator, RESET, {"topic": "payments", "mode": "latest"})

    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "topic_not_consumed"
    assert "orders" in error["message"]


def test_an_offset_for_a_queue_the_topic_lacks_is_404(as_operator, billing):
    response = post(as_operator, RESET, {"topic": "orders", "mode": "offset", "offsets": {"7": 1}})

    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "queue_not_found"
    assert "queues 0 to 1" in error["message"]


# Undo


def test_reset_then_undo_round_trip(as_operator, billing):
    apply(as_operator, preview(as_operator)["token"])
    assert offsets(billing) == [0, 0]

    undo = preview(as_operator, UNDO, topic="orders")
    assert undo["mode"] == "undo"
    assert [(q["current"], q["target"]) for q in undo["queues"]] == [(0, 2), (0, 5)]
    assert offsets(billing) == [0, 0]

    response = apply(as_operator, undo["token"], UNDO)

    assert response.status_code == 200
    assert response.json()["mode"] == "undo"
    assert offsets(billing) == [2, 5]
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["offset.reset", "offset.undo"]


def test_undo_with_no_reset_is_404(as_operator, billing):
    response = post(as_operator, UNDO, {"topic": "orders"})

    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "nothing_to_undo"
    assert "no reset" in error["message"]


def test_undo_of_an_unknown_topic_is_404(as_operator, billing):
    response = post(as_operator, UNDO, {"topic": "nope"})

    assert response.status_code == 404
    assert error_of(response)["code"] == "topic_not_found"


def test_an_undo_moved_since_its_preview_is_409(as_operator, billing):
    apply(as_operator, preview(as_operator)["token"])
    token = preview(as_operator, UNDO, topic="orders")["token"]
    billing.commit_offset("billing", "orders", 1, 1)

    response = apply(as_operator, token, UNDO)

    assert response.status_code == 409
    assert error_of(response)["code"] == "offsets_moved"
    assert offsets(billing) == [0, 1]


def test_a_reset_token_is_not_applied_as_an_undo(as_operator, billing):
    token = preview(as_operator)["token"]

    response = apply(as_operator, token, UNDO)

    assert response.status_code == 400
    assert error_of(response)["code"] == "wrong_preview"
    assert offsets(billing) == [2, 5]


@pytest.mark.parametrize(
    "data, field",
    [
        ({}, "topic"),
        ({"topic": "orders", "mode": "earliest"}, "mode"),
        ({"dry_run": False, "plan": "0123456789abcdef", "topic": "orders"}, "topic"),
    ],
)
def test_bad_undo_bodies_are_400(as_operator, billing, data, field):
    response = post(as_operator, UNDO, data)

    assert response.status_code == 400
    assert field in error_of(response)["details"]["fields"]


def test_undo_without_a_plan_says_to_preview_first(as_operator, billing):
    response = post(as_operator, UNDO, {"dry_run": False})

    assert response.status_code == 400
    assert "Preview the undo first" in error_of(response)["message"]


def test_a_preview_says_whether_the_reset_can_be_undone(as_operator, billing):
    queues = HISTORY_KEPT + 1
    billing.create_topic("wide", queues)
    billing.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)])
    billing.commit_offsets("billing", "wide", dict.fromkeys(range(queues), 1))

    assert preview(as_operator)["undoable"] is True
    assert preview(as_operator, topic="wide", mode="earliest")["undoable"] is False


def test_an_undo_the_history_cannot_hold_whole_is_refused_with_409(as_operator, billing):
    queues = HISTORY_KEPT + 1
    billing.create_topic("wide", queues)
    billing.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)])
    billing.commit_offsets("billing", "wide", dict.fromkeys(range(queues), 1))
    apply(as_operator, preview(as_operator, topic="wide", mode="earliest")["token"])

    response = post(as_operator, UNDO, {"topic": "wide"})

    assert response.status_code == 409
    assert error_of(response)["code"] == "not_undoable"
    assert "cannot be undone" in error_of(response)["message"]
    assert set(billing.committed_offsets("billing", "wide").values()) == {0}


def test_a_big_topics_preview_lists_the_first_queues_and_counts_them_all(as_operator, billing):
    queues = LISTED_QUEUES + 100
    billing.create_topic("wide", queues)
    billing.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)] * 2)
    billing.commit_offsets("billing", "wide", dict.fromkeys(range(queues), 2))

    data = preview(as_operator, topic="wide", mode="earliest")

    assert len(data["queues"]) == LISTED_QUEUES
    assert (data["queue_count"], data["listed_all"]) == (queues, False)
    assert (data["changes"], data["consumed_again"], data["clamped"]) == (queues, 2 * queues, 0)
    assert "moves" not in data
    applied = apply(as_operator, data["token"]).json()
    assert applied["changed"] == queues
    assert len(applied["changes"]) == LISTED_QUEUES
    assert set(billing.committed_offsets("billing", "wide").values()) == {0}


def test_a_small_topics_preview_lists_every_queue(as_operator, billing):
    data = preview(as_operator)

    assert (data["queue_count"], data["listed_all"], len(data["queues"])) == (2, True, 2)
