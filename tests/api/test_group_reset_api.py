"""/api/v1/groups/<group>/reset/: previewed (dry_run), then applied on the group as it is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.api import converters  # noqa: F401  (registers <name:...> before the views load)
from console.api.views.resets import PREVIEW_REQUESTS
from console.audit.models import AuditEntry
from console.groups.models import PREVIEW_LIFETIME, AppliedReset, ResetPreview
from storeadapter.engine.membership import heartbeat
from storeadapter.offset_reset import LISTED_QUEUES, ResetPlan
from storeadapter.reset_modes import MAX_TIME_MS, RESET_MODES
from tests.api.apitools import error_of, expected_status
from tests.worlds import billing_on_orders

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
RESET = "/api/v1/groups/billing/reset/"


def undo_url(reset_id: int) -> str:
    return f"/api/v1/groups/billing/resets/{reset_id}/undo/"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): at 2 on queue 0, 5 on queue 1."""
    return billing_on_orders(store, committed=(2, 5))


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
    reset_id = apply(as_admin, preview(as_admin)["token"]).json()["reset_id"]
    token = post(as_admin, undo_url(reset_id)).json()["token"]

    response = apply(clients[who], token, undo_url(reset_id))

    assert response.status_code == expected_status(who, "operator", 200)
    assert offsets(billing) == ([2, 5] if who in ("operator", "admin") else [0, 0])


# Preview


def test_each_mode_s_preview_request_has_its_value_field():
    for mode in RESET_MODES:
        fields = set(PREVIEW_REQUESTS[mode.name]().fields)
        value = set() if mode.api_field is None else {mode.api_field}
        assert fields == {"topic", "mode", "dry_run", *value}


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
    assert (body["relative"], body["live_members"], body["past_newest"]) == (False, 0, 0)
    saved = ResetPreview.objects.get(token=body["token"])
    assert saved.group == "billing"
    assert body["expires_ms"] > body["span_to_ms"]


def test_the_preview_is_the_plan_the_server_keeps(as_operator, billing):
    body = preview(as_operator)

    plan = ResetPlan.from_dict(ResetPreview.objects.get(token=body["token"]).plan)
    kept = {k: v for k, v in plan.as_dict().items() if k not in ("total_queues", "clamped_total")}
    assert {k: v for k, v in body.items() if k in kept} == kept


def test_the_preview_counts_the_groups_live_members(as_operator, billing):
    heartbeat(billing.path, "billing", "worker-1", ["orders"])

    assert preview(as_operator)["live_members"] == 1


def test_a_time_after_the_newest_message_is_said_to_be_the_same_as_latest(as_operator, billing):
    body = preview(as_operator, topic="orders", mode="time", value=MAX_TIME_MS)

    assert body["past_newest"] == body["queue_count"] == 2
    assert [q["target"] for q in body["queues"]] == [5, 5]


@pytest.mark.parametrize(
    "data, targets",
    [
        ({"mode": "latest"}, [5, 5]),
        ({"mode": "time", "value": 0}, [0, 0]),
        ({"mode": "shift", "value": -1}, [1, 4]),
        ({"mode": "offset", "offsets": {"1": 3}}, [2, 3]),
        ({"mode": "group", "source": "other"}, [1, 5]),
    ],
)
def test_each_mode_previews_its_targets(as_operator, billing, data, targets):
    billing.commit_offset("other", "orders", 0, 1)

    body = preview(as_operator, topic="orders", **data)

    assert [q["target"] for q in body["queues"]] == targets
    assert offsets(billing) == [2, 5]


def test_a_target_out_of_range_is_clamped_and_said_so(as_operator, billing):
    body = preview(as_operator, topic="orders", mode="shift", value=10)

    assert [q["target"] for q in body["queues"]] == [5, 5]
    assert "past the queue's end" in body["queues"][0]["clamped"]
    assert body["queues"][1]["clamped"] is not None


def test_every_preview_is_kept_under_its_own_token(as_operator, billing):
    first = preview(as_operator)
    second = preview(as_operator)

    assert first["token"] != second["token"]
    assert ResetPreview.objects.count() == 2


# Apply


def test_applying_moves_the_offsets_and_is_audited(as_operator, billing):
    token = preview(as_operator)["token"]

    response = apply(as_operator, token)

    assert response.status_code == 200
    body = response.json()
    reset = AppliedReset.objects.get()
    assert (body["reset_id"], body["mode"], body["consumed_again"], body["skipped"]) == (
        reset.pk,
        "earliest",
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
    assert f"reset #{reset.pk}" in entry.detail
    assert entry.link == f"/groups/billing/resets/{reset.pk}/undo/"


def test_a_preview_is_applied_once(as_operator, billing):
    token = preview(as_operator)["token"]
    apply(as_operator, token)

    response = apply(as_operator, token)

    assert response.status_code == 404
    assert error_of(response)["code"] == "preview_not_found"


def test_a_consumers_commits_since_the_preview_do_not_stop_the_reset(as_operator, billing):
    token = preview(as_operator)["token"]
    billing.commit_offset("billing", "orders", 0, 3)

    response = apply(as_operator, token)

    assert response.status_code == 200
    assert [(c["queue"], c["old"], c["new"]) for c in response.json()["changes"]] == [
        (0, 3, 0),
        (1, 5, 0),
    ]
    assert offsets(billing) == [0, 0]


def test_a_shift_is_applied_from_the_offsets_at_apply_time(as_operator, billing):
    token = preview(as_operator, topic="orders", mode="shift", value=-1)["token"]
    billing.commit_offset("billing", "orders", 0, 4)

    body = apply(as_operator, token).json()

    assert [(c["old"], c["new"]) for c in body["changes"]] == [(4, 3), (5, 4)]
    assert (body["consumed_again"], body["skipped"]) == (2, 0)


def test_copying_offsets_into_a_new_group_is_previewed_and_applied(as_operator, billing):
    url = "/api/v1/groups/copy-of-billing/reset/"
    body = preview(as_operator, url, topic="orders", mode="group", source="billing")

    applied = apply(as_operator, body["token"], url).json()

    assert [(c["queue"], c["old"], c["new"]) for c in applied["changes"]] == [
        (0, None, 2),
        (1, None, 5),
    ]
    assert billing.committed_offset("copy-of-billing", "orders", 1) == 5
    assert AuditEntry.objects.get().target == "group copy-of-billing topic orders"


def test_a_preview_made_before_queues_were_added_is_409_with_the_request_to_preview_again(
    as_operator, billing
):
    token = preview(as_operator, topic="orders", mode="shift", value=-1)["token"]
    billing.add_queues("orders", 1)

    response = apply(as_operator, token)

    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "preview_outdated"
    assert "3 queues now, 2 when this was previewed" in error["message"]
    again = error["details"]["preview_again"]
    assert again == {
        "path": RESET,
        "body": {"topic": "orders", "mode": "shift", "value": -1},
    }
    assert offsets(billing) == [2, 5]
    assert preview(as_operator, **again["body"])["queue_count"] == 3
    assert not AuditEntry.objects.exists()


def test_an_edited_plan_is_refused_and_nothing_changes(as_operator, billing):
    body = preview(as_operator)
    edited = {**body, "queues": [{**q, "target": 5} for q in body["queues"]]}

    response = post(as_operator, RESET, {"dry_run": False, "plan": edited})

    assert response.status_code == 400
    assert "plan" in error_of(response)["details"]["fields"]
    assert offsets(billing) == [2, 5]
    assert not AuditEntry.objects.exists()


def test_an_expired_preview_is_400(as_operator, billing):
    token = preview(as_operator)["token"]
    long_ago = timezone.now() - PREVIEW_LIFETIME - timedelta(seconds=1)
    ResetPreview.objects.filter(token=token).update(created_at=long_ago)

    response = apply(as_operator, token)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "preview_expired"
    assert "more than 30 minutes old: preview again" in error["message"]
    assert error["details"]["preview_again"]["body"] == {"topic": "orders", "mode": "earliest"}
    assert offsets(billing) == [2, 5]


def test_an_unknown_token_is_404(as_operator, billing):
    response = apply(as_operator, "0123456789abcdef")

    assert response.status_code == 404
    assert error_of(response)["code"] == "preview_not_found"


def test_another_groups_token_is_404_here(as_operator, billing):
    billing.commit_offset("other", "orders", 0, 1)
    token = preview(as_operator, "/api/v1/groups/other/reset/", topic="orders", mode="latest")

    response = apply(as_operator, token["token"])

    assert response.status_code == 404
    assert billing.committed_offset("other", "orders", 0) == 1


def test_applying_without_a_plan_says_to_preview_first(as_operator, billing):
    response = post(as_operator, RESET, {"dry_run": False})

    assert response.status_code == 400
    assert "Preview first" in error_of(response)["message"]


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
        ({"topic": "orders", "mode": "group"}, "source"),
        ({"topic": "orders", "mode": "group", "source": "a b"}, "source"),
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


# Undo by id


def test_reset_then_undo_by_id_round_trip(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]
    assert offsets(billing) == [0, 0]

    undo = post(as_operator, undo_url(reset_id)).json()
    assert (undo["mode"], undo["value"]) == ("undo", reset_id)
    assert [(q["current"], q["target"]) for q in undo["queues"]] == [(0, 2), (0, 5)]
    assert offsets(billing) == [0, 0]

    response = apply(as_operator, undo["token"], undo_url(reset_id))

    assert response.status_code == 200
    assert response.json()["mode"] == "undo"
    assert offsets(billing) == [2, 5]
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["offset.reset", "offset.undo"]


def test_the_resets_list_gives_every_reset_and_its_undos(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]
    undo_id = apply(
        as_operator, post(as_operator, undo_url(reset_id)).json()["token"], undo_url(reset_id)
    ).json()["reset_id"]

    results = as_operator.get("/api/v1/groups/billing/resets/").json()["results"]

    assert [(r["id"], r["mode"], r["undoes"], r["undone_by"]) for r in results] == [
        (undo_id, "undo", reset_id, []),
        (reset_id, "earliest", None, [undo_id]),
    ]
    assert results[1]["moved"] == 2 and results[1]["consumed_again"] == 7


def test_one_reset_gives_what_it_replaced(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]

    body = as_operator.get(f"/api/v1/groups/billing/resets/{reset_id}/").json()

    assert body["queues"] == [
        {"queue": 0, "before": 2, "after": 0},
        {"queue": 1, "before": 5, "after": 0},
    ]
    assert body["listed_all"] is True


def test_an_unknown_reset_is_404(as_operator, billing):
    for response in (
        as_operator.get("/api/v1/groups/billing/resets/999/"),
        post(as_operator, undo_url(999)),
    ):
        assert response.status_code == 404
        assert error_of(response)["code"] == "reset_not_found"


def test_an_undo_after_the_consumers_moved_on_sets_the_previewed_offsets(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]
    token = post(as_operator, undo_url(reset_id)).json()["token"]
    billing.commit_offset("billing", "orders", 1, 1)

    response = apply(as_operator, token, undo_url(reset_id))

    assert response.status_code == 200
    assert offsets(billing) == [2, 5]


def test_a_reset_token_is_not_applied_as_an_undo(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]
    token = preview(as_operator, topic="orders", mode="latest")["token"]

    response = apply(as_operator, token, undo_url(reset_id))

    assert response.status_code == 400
    assert error_of(response)["code"] == "wrong_preview"
    assert offsets(billing) == [0, 0]


def test_an_undo_token_is_not_applied_as_a_reset(as_operator, billing):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]
    token = post(as_operator, undo_url(reset_id)).json()["token"]

    response = apply(as_operator, token)

    assert response.status_code == 400
    assert error_of(response)["code"] == "wrong_preview"


@pytest.mark.parametrize(
    "data, field",
    [
        ({"topic": "orders"}, "topic"),
        ({"dry_run": "yes"}, "dry_run"),
        ({"dry_run": False, "plan": "0123456789abcdef", "topic": "orders"}, "topic"),
        ({"dry_run": False}, "plan"),
    ],
)
def test_bad_undo_bodies_are_400(as_operator, billing, data, field):
    reset_id = apply(as_operator, preview(as_operator)["token"]).json()["reset_id"]

    response = post(as_operator, undo_url(reset_id), data)

    assert response.status_code == 400
    assert field in error_of(response)["details"]["fields"]


def test_a_reset_of_more_than_a_thousand_queues_is_undone_whole(as_operator, billing):
    queues = LISTED_QUEUES + 1
    billing.create_topic("wide", queues)
    billing.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)])
    billing.commit_offsets("billing", "wide", dict.fromkeys(range(queues), 1))
    reset_id = apply(
        as_operator, preview(as_operator, topic="wide", mode="earliest")["token"]
    ).json()["reset_id"]

    token = post(as_operator, undo_url(reset_id)).json()["token"]
    apply(as_operator, token, undo_url(reset_id))

    assert set(billing.committed_offsets("billing", "wide").values()) == {1}


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
