"""Offset resets from the group page: preview, apply only as previewed, undo; all audited."""

import html
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from console.api.models import PREVIEW_LIFETIME, ResetPreview
from console.audit.models import AuditEntry
from storeadapter.offset_reset import HISTORY_KEPT, LISTED_QUEUES

pytestmark = [pytest.mark.django_db]

GROUP_URL = "/groups/billing/"
PREVIEW = "/groups/billing/reset/preview/"
APPLY = "/groups/billing/reset/apply/"
UNDO = "/groups/billing/reset/undo/?topic=orders"


@pytest.fixture
def billing(store):
    """Group `billing` on `orders` (2 queues of 5 messages): committed 3 on queue 0, 4 on 1."""
    store.create_topic("orders", 2)
    for queue in (0, 1):
        for n in range(5):
            store.append("orders", f"m{n}".encode(), queue=queue)
    store.commit_offset("billing", "orders", 0, 3)
    store.commit_offset("billing", "orders", 1, 4)
    return store


def committed(store) -> list:
    return [store.committed_offset("billing", "orders", q) for q in (0, 1)]


def text(response) -> str:
    return html.unescape(response.content.decode())


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def preview(client, **data):
    return client.post(PREVIEW, {"topic": "orders", **data})


def plan_of(response) -> str:
    return response.context["plan_json"]


# Preview


def test_preview_earliest_shows_the_messages_consumed_again(as_operator, billing):
    response = preview(as_operator, mode="earliest")

    assert response.status_code == 200
    plan = response.context["plan"]
    assert [(q.current, q.target, q.consumed_again, q.skipped) for q in plan.queues] == [
        (3, 0, 3, 0),
        (4, 0, 4, 0),
    ]
    assert response.context["consumed_again"] == 7
    assert "7 messages" in text(response)
    assert committed(billing) == [3, 4]  # a preview changes nothing


def test_preview_shows_the_time_span_of_the_affected_messages(as_operator, billing):
    first = billing.read("orders", 0, 0, 1)[0].store_time_ms
    last = billing.read("orders", 1, 3, 1)[0].store_time_ms

    response = preview(as_operator, mode="earliest")

    page = text(response)
    assert "Time span affected" in page
    for ms in (first, last):
        stamp = datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        assert stamp in page


def test_preview_carries_the_plan_in_the_apply_form(as_operator, billing):
    response = preview(as_operator, mode="latest")

    content = response.content.decode()
    assert 'action="/groups/billing/reset/apply/"' in content
    assert json.loads(plan_of(response))["token"] == response.context["plan"].token
    assert response.context["skipped"] == 3


def test_preview_shift_says_in_words_when_a_target_is_clamped(as_operator, billing):
    response = preview(as_operator, mode="shift", shift="-4")

    plan = response.context["plan"]
    assert [q.target for q in plan.queues] == [0, 0]
    assert plan.queues[0].clamped and plan.queues[1].clamped is None
    assert "-1 is below the queue's first offset 0: moved up to 0" in text(response)
    assert "Clamped:" in text(response)


def test_preview_time_finds_the_first_message_stored_then(as_operator, billing):
    billing.append("orders", b"late", queue=0)
    late = billing.read("orders", 0, 5, 1)[0].store_time_ms
    when = datetime.fromtimestamp(late / 1000 + 1, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")

    response = preview(as_operator, mode="time", when=when)

    plan = response.context["plan"]
    assert plan.mode == "time"
    assert [q.target for q in plan.queues] == [6, 5]  # after every message: the end


def test_preview_offsets_per_queue_moves_only_those_queues(as_operator, billing):
    response = preview(as_operator, mode="offset", offsets="0=1")

    plan = response.context["plan"]
    assert [(q.current, q.target) for q in plan.queues] == [(3, 1), (4, 4)]
    assert response.context["changes"] == 1


def test_bad_offset_lines_are_a_form_error(as_operator, billing):
    response = preview(as_operator, mode="offset", offsets="zero=1\n0=")

    assert response.status_code == 200
    errors = response.context["reset_form"].errors["offsets"]
    assert any("Line 1" in e for e in errors) and any("Line 2" in e for e in errors)


def test_an_offset_for_a_missing_queue_is_a_form_error(as_operator, billing):
    response = preview(as_operator, mode="offset", offsets="7=1")

    assert response.status_code == 200
    assert "queues 0 to 1" in str(response.context["reset_form"].non_field_errors())


def test_shift_without_a_number_is_a_form_error(as_operator, billing):
    response = preview(as_operator, mode="shift", shift="")

    assert "shift" in response.context["reset_form"].errors


def test_unknown_topic_is_a_form_error(as_operator, billing):
    response = as_operator.post(PREVIEW, {"topic": "nope", "mode": "latest"})

    assert response.status_code == 200
    assert "topic" in response.context["reset_form"].errors


# Apply


def test_apply_commits_the_previewed_offsets_and_audits_with_the_undo_link(as_operator, billing):
    plan = plan_of(preview(as_operator, mode="earliest"))

    response = as_operator.post(APPLY, {"plan": plan}, follow=True)

    assert response.redirect_chain[-1][0] == GROUP_URL
    assert committed(billing) == [0, 0]
    assert any("Reset to earliest" in f for f in flashes(response))
    entry = AuditEntry.objects.get(action="offset.reset")
    assert entry.username == "otto"
    assert entry.target == "group billing topic orders"
    assert entry.before == {"0": 3, "1": 4}
    assert entry.after == {"0": 0, "1": 0}
    assert entry.link == UNDO
    history = billing.offset_history("billing", "orders", limit=2)
    assert {c.who for c in history} == {"otto"}


def test_apply_after_the_offsets_moved_changes_nothing(as_operator, billing):
    plan = plan_of(preview(as_operator, mode="earliest"))
    billing.commit_offset("billing", "orders", 1, 5)  # a consumer commits meanwhile

    response = as_operator.post(APPLY, {"plan": plan}, follow=True)

    assert committed(billing) == [3, 5]
    assert any("moved since the preview" in f for f in flashes(response))
    assert not AuditEntry.objects.exists()


def test_a_tampered_plan_is_refused_and_changes_nothing(as_operator, billing):
    data = json.loads(plan_of(preview(as_operator, mode="earliest")))
    data["queues"][0]["target"] = 1

    response = as_operator.post(APPLY, {"plan": json.dumps(data)}, follow=True)

    assert committed(billing) == [3, 4]
    assert any("altered" in f for f in flashes(response))
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("plan", ["", "not json", "[1, 2]", '{"queues": 3}'])
def test_a_plan_that_is_not_a_preview_is_refused(as_operator, billing, plan):
    response = as_operator.post(APPLY, {"plan": plan}, follow=True)

    assert response.status_code == 200
    assert committed(billing) == [3, 4]
    assert any("cannot be used" in f for f in flashes(response))


def test_a_plan_for_another_group_is_refused(as_operator, billing):
    billing.commit_offset("other", "orders", 0, 5)
    plan = plan_of(
        as_operator.post("/groups/other/reset/preview/", {"topic": "orders", "mode": "earliest"})
    )

    response = as_operator.post(APPLY, {"plan": plan}, follow=True)

    assert any("another group" in f for f in flashes(response))
    assert billing.committed_offset("other", "orders", 0) == 5
    assert committed(billing) == [3, 4]


def test_skip_backlog_previews_then_applies_a_reset_to_latest(as_operator, billing):
    response = preview(as_operator, mode="latest")
    as_operator.post(APPLY, {"plan": plan_of(response)})

    assert committed(billing) == [5, 5]


# Undo


def test_undo_preview_then_apply_restores_the_offsets(as_operator, billing):
    as_operator.post(APPLY, {"plan": plan_of(preview(as_operator, mode="earliest"))})
    assert committed(billing) == [0, 0]

    undo = as_operator.get(UNDO)
    assert undo.status_code == 200
    assert undo.context["is_undo"]
    assert [(q.current, q.target) for q in undo.context["plan"].queues] == [(0, 3), (0, 4)]
    response = as_operator.post(APPLY, {"plan": plan_of(undo)}, follow=True)

    assert committed(billing) == [3, 4]
    entry = AuditEntry.objects.get(action="offset.undo")
    assert (entry.before, entry.after) == ({"0": 0, "1": 0}, {"0": 3, "1": 4})
    assert any("Undid" in f for f in flashes(response))


def test_undo_without_a_reset_is_an_error_flash(as_operator, billing):
    response = as_operator.get(UNDO, follow=True)

    assert response.redirect_chain[-1][0].startswith(GROUP_URL)
    assert any("no reset" in f for f in flashes(response))


def test_undo_of_an_unknown_topic_is_an_error_flash(as_operator, billing):
    response = as_operator.get("/groups/billing/reset/undo/?topic=nope", follow=True)

    assert any("Nothing to undo" in f for f in flashes(response))


# Roles


def test_anonymous_preview_is_sent_to_login(client, billing):
    response = client.post(PREVIEW, {"topic": "orders", "mode": "earliest"})

    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


def test_viewer_cannot_preview(as_viewer, billing):
    assert preview(as_viewer, mode="earliest").status_code == 403


def test_viewer_apply_is_403_and_changes_nothing(as_viewer, as_operator, billing):
    plan = plan_of(preview(as_operator, mode="earliest"))

    response = as_viewer.post(APPLY, {"plan": plan})

    assert response.status_code == 403
    assert committed(billing) == [3, 4]
    assert not AuditEntry.objects.exists()


def test_viewer_cannot_see_the_undo_preview(as_viewer, as_operator, billing):
    as_operator.post(APPLY, {"plan": plan_of(preview(as_operator, mode="earliest"))})

    assert as_viewer.get(UNDO).status_code == 403


def test_preview_and_apply_refuse_get(as_operator, billing):
    assert as_operator.get(PREVIEW).status_code == 405
    assert as_operator.get(APPLY).status_code == 405


def test_reset_pages_of_an_unknown_group_are_404(as_operator, billing):
    assert as_operator.post("/groups/nope/reset/preview/", {"mode": "latest"}).status_code == 404
    assert as_operator.post("/groups/nope/reset/apply/", {"plan": "{}"}).status_code == 404


def test_a_reset_of_more_queues_than_the_history_keeps_warns_it_cannot_be_undone(
    as_operator, store
):
    queues = HISTORY_KEPT + 1
    store.create_topic("wide", queues)
    store.append_batch("wide", [{"body": b"m", "queue": q} for q in range(queues)])
    store.commit_offsets("billing", "wide", dict.fromkeys(range(queues), 1))

    response = as_operator.post(PREVIEW, {"topic": "wide", "mode": "earliest"})

    assert response.status_code == 200
    assert "cannot be undone afterwards" in text(response)
    assert "cannot be undone" not in text(preview_small(as_operator, store))


def preview_small(client, store):
    store.create_topic("orders", 2)
    store.append("orders", b"m", queue=0)
    store.commit_offset("billing", "orders", 0, 1)
    return preview(client, mode="earliest")


# A big topic: its plan is kept here and applied by its token

BIG = LISTED_QUEUES + 100


@pytest.fixture
def wide(store):
    """Group `billing` on `wide` (more queues than a plan lists), at 2 of 3 on each."""
    store.create_topic("wide", BIG)
    store.append_batch("wide", [{"body": b"m", "queue": q} for q in range(BIG)] * 3)
    store.commit_offsets("billing", "wide", dict.fromkeys(range(BIG), 2))
    return store


def test_a_big_topics_preview_lists_the_first_queues_and_counts_them_all(as_operator, wide):
    response = as_operator.post(PREVIEW, {"topic": "wide", "mode": "earliest"})

    page = text(response)
    assert response.status_code == 200
    assert f"{BIG} of {BIG}" in page
    assert f"listed below are the first {LISTED_QUEUES} that move" in page
    assert page.count('class="tm-reset-moves"') == LISTED_QUEUES
    assert response.context["consumed_again"] == 2 * BIG
    assert response.context["plan_json"] == ""  # the page carries the token instead
    assert f'name="token" value="{response.context["plan"].token}"' in page


def test_a_big_topics_plan_is_applied_by_its_token_to_every_queue(as_operator, wide):
    token = as_operator.post(PREVIEW, {"topic": "wide", "mode": "earliest"}).context["plan"].token

    response = as_operator.post(APPLY, {"token": token}, follow=True)

    assert set(wide.committed_offsets("billing", "wide").values()) == {0}
    assert any(f"{BIG} queues moved" in f for f in flashes(response))
    entry = AuditEntry.objects.get(action="offset.reset")
    assert len(entry.before) == LISTED_QUEUES
    assert f"{BIG} queues moved (the first {LISTED_QUEUES} listed)" in entry.detail
    again = as_operator.post(APPLY, {"token": token}, follow=True)
    assert any("applied already" in f for f in flashes(again))


def test_an_expired_big_plan_is_refused_and_changes_nothing(as_operator, wide):
    token = as_operator.post(PREVIEW, {"topic": "wide", "mode": "earliest"}).context["plan"].token
    ResetPreview.objects.filter(token=token).update(
        created_at=timezone.now() - PREVIEW_LIFETIME - timedelta(seconds=1)
    )

    response = as_operator.post(APPLY, {"token": token}, follow=True)

    assert any("more than 30 minutes old" in f for f in flashes(response))
    assert set(wide.committed_offsets("billing", "wide").values()) == {2}
