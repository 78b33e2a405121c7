"""Offset resets from the group page: preview, apply on a running group, preview again."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from console.audit.models import AuditEntry
from console.groups.forms import ResetForm
from console.groups.models import PREVIEW_LIFETIME, AppliedReset, ResetPreview
from storeadapter.engine.membership import heartbeat
from storeadapter.offset_reset import LISTED_QUEUES, ResetPlan
from storeadapter.reset_modes import RESET_MODES
from tests.console.resetpages import committed, flashes, text

pytestmark = [pytest.mark.django_db]

GROUP_URL = "/groups/billing/"
PREVIEW = "/groups/billing/reset/preview/"
APPLY = "/groups/billing/reset/apply/"
AGAIN = "/groups/billing/reset/again/"


def preview(client, **data):
    return client.post(PREVIEW, {"topic": "orders", **data})


def token_of(response) -> str:
    return response.context["token"]


def apply(client, response, **kwargs):
    return client.post(APPLY, {"token": token_of(response)}, **kwargs)


# Preview


def test_every_mode_s_value_has_its_field_on_the_form():
    fields = ResetForm(topics=["orders"]).fields

    for mode in RESET_MODES:
        assert mode.form_field is None or mode.form_field in fields
    assert {m.form_field for m in RESET_MODES} - {None} == {"offsets", "when", "shift", "source"}


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


def test_preview_is_kept_on_the_server_and_its_form_sends_only_the_token(as_operator, billing):
    response = preview(as_operator, mode="latest")

    content = response.content.decode()
    kept = ResetPreview.objects.get()
    assert 'action="/groups/billing/reset/apply/"' in content
    assert f'name="token" value="{kept.token}"' in content
    assert 'name="plan"' not in content
    assert ResetPlan.from_dict(kept.plan) == response.context["plan"]
    assert response.context["skipped"] == 3


def test_preview_says_how_many_live_members_the_group_has(as_operator, billing):
    for member in ("a", "b"):
        heartbeat(billing.path, "billing", member, ["orders"])

    page = text(preview(as_operator, mode="latest"))

    assert "2 live members: they continue from the new offsets" in page


def test_preview_of_a_group_without_live_members_says_it_starts_there(as_operator, billing):
    page = text(preview(as_operator, mode="latest"))

    assert "none running: the group starts from the new offsets when a member joins" in page


def test_a_time_after_the_newest_message_says_it_is_the_same_as_latest(as_operator, billing):
    when = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")

    response = preview(as_operator, mode="time", when=when)

    assert "is after the newest message: the same as latest" in text(response)
    assert [q.target for q in response.context["plan"].queues] == [5, 5]


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


def test_apply_commits_the_previewed_offsets_and_audits_with_this_resets_undo(as_operator, billing):
    response = apply(as_operator, preview(as_operator, mode="earliest"), follow=True)

    reset = AppliedReset.objects.get()
    assert response.redirect_chain[-1][0] == GROUP_URL + "#resets"
    assert committed(billing) == [0, 0]
    assert any(
        f"Reset to earliest of billing on orders applied (reset #{reset.pk}): 2 queues moved; "
        "7 messages will be consumed again, 0 skipped." in f
        for f in flashes(response)
    )
    entry = AuditEntry.objects.get(action="offset.reset")
    assert entry.username == "otto"
    assert entry.target == "group billing topic orders"
    assert entry.before == {"0": 3, "1": 4}
    assert entry.after == {"0": 0, "1": 0}
    assert entry.link == f"/groups/billing/resets/{reset.pk}/undo/"
    assert f"reset #{reset.pk}" in entry.detail
    assert {c.who for c in billing.offset_history("billing", "orders", limit=2)} == {"otto"}


def test_the_message_after_applying_links_to_the_undo_of_this_reset(as_operator, billing):
    response = apply(as_operator, preview(as_operator, mode="earliest"), follow=True)

    reset = AppliedReset.objects.get()
    assert f'<a href="/groups/billing/resets/{reset.pk}/undo/">Undo reset #{reset.pk}' in (
        response.content.decode()
    )


def test_apply_after_the_consumers_committed_sets_the_previewed_targets(as_operator, billing):
    previewed = preview(as_operator, mode="earliest")
    billing.commit_offset("billing", "orders", 1, 5)  # a consumer commits meanwhile

    response = apply(as_operator, previewed, follow=True)

    assert committed(billing) == [0, 0]
    assert any("8 messages will be consumed again" in f for f in flashes(response))
    assert AuditEntry.objects.get(action="offset.reset").before == {"0": 3, "1": 5}


def test_a_shift_is_applied_from_where_the_group_is_when_applied(as_operator, billing):
    previewed = preview(as_operator, mode="shift", shift="-2")
    billing.commit_offset("billing", "orders", 0, 5)

    apply(as_operator, previewed)

    assert committed(billing) == [3, 2]
    entry = AuditEntry.objects.get(action="offset.reset")
    assert (entry.before, entry.after) == ({"0": 5, "1": 4}, {"0": 3, "1": 2})


def test_a_plan_posted_back_by_the_browser_is_not_applied(as_operator, billing):
    edited = preview(as_operator, mode="earliest").context["plan"].as_dict()
    edited["queues"] = [{**q, "target": 5} for q in edited["queues"]]

    response = as_operator.post(APPLY, {"plan": str(edited)}, follow=True)

    assert committed(billing) == [3, 4]
    assert any("cannot be used" in f for f in flashes(response))
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("token", ["", "0123456789abcdef", "not a token"])
def test_an_unknown_token_is_refused_and_changes_nothing(as_operator, billing, token):
    response = as_operator.post(APPLY, {"token": token}, follow=True)

    assert response.status_code == 200
    assert committed(billing) == [3, 4]
    assert any("cannot be used" in f for f in flashes(response))


def test_another_groups_preview_is_not_applied_here(as_operator, billing):
    billing.commit_offset("other", "orders", 0, 5)
    other = as_operator.post(
        "/groups/other/reset/preview/", {"topic": "orders", "mode": "earliest"}
    )

    response = apply(as_operator, other, follow=True)

    assert any("cannot be used" in f for f in flashes(response))
    assert billing.committed_offset("other", "orders", 0) == 5


def test_a_preview_is_applied_once(as_operator, billing):
    previewed = preview(as_operator, mode="earliest")
    apply(as_operator, previewed)
    billing.commit_offset("billing", "orders", 0, 2)

    response = apply(as_operator, previewed, follow=True)

    assert any("applied already" in f for f in flashes(response))
    assert committed(billing) == [2, 0]


def test_skip_backlog_previews_then_applies_a_reset_to_latest(as_operator, billing):
    apply(as_operator, preview(as_operator, mode="latest"))

    assert committed(billing) == [5, 5]


# Refused: the preview no longer means what it said


def test_a_preview_made_before_queues_were_added_is_refused_with_preview_again(
    as_operator, billing
):
    previewed = preview(as_operator, mode="earliest")
    billing.add_queues("orders", 1)

    response = apply(as_operator, previewed)

    assert response.status_code == 409
    assert "orders has 3 queues now, 2 when this was previewed" in text(response)
    assert "Nothing was changed." in text(response)
    assert f'name="token" value="{token_of(previewed)}"' in response.content.decode()
    assert committed(billing) == [3, 4]
    assert not AuditEntry.objects.exists()


def test_preview_again_plans_the_same_reset_from_the_offsets_now(as_operator, billing):
    previewed = preview(as_operator, mode="shift", shift="-1")
    billing.add_queues("orders", 1)
    billing.commit_offset("billing", "orders", 0, 5)

    again = as_operator.post(AGAIN, {"token": token_of(previewed)})

    assert again.status_code == 200
    plan = again.context["plan"]
    assert (plan.mode, plan.value, plan.queue_count) == ("shift", -1, 3)
    assert [q.target for q in plan.queues[:2]] == [4, 3]
    apply(as_operator, again)
    assert committed(billing) == [4, 3]


def test_an_expired_preview_is_refused_with_preview_again(as_operator, billing):
    previewed = preview(as_operator, mode="earliest")
    ResetPreview.objects.update(created_at=timezone.now() - PREVIEW_LIFETIME - timedelta(seconds=1))

    response = apply(as_operator, previewed)

    assert response.status_code == 409
    assert "more than 30 minutes old" in text(response)
    assert "Preview again" in text(response)
    assert committed(billing) == [3, 4]


def test_preview_again_of_an_unknown_token_is_an_error_flash(as_operator, billing):
    response = as_operator.post(AGAIN, {"token": "0123456789abcdef"}, follow=True)

    assert any("cannot be previewed again" in f for f in flashes(response))


# Copy from another group: the same preview, apply and undo


def test_the_offsets_of_another_group_are_previewed_applied_and_undone(as_operator, billing):
    billing.commit_offset("source", "orders", 0, 1)
    billing.commit_offset("source", "orders", 1, 2)

    previewed = preview(as_operator, mode="group", source="source")
    assert [(q.current, q.target) for q in previewed.context["plan"].queues] == [(3, 1), (4, 2)]
    apply(as_operator, previewed)
    assert committed(billing) == [1, 2]

    reset = AppliedReset.objects.get()
    undo = as_operator.get(f"/groups/billing/resets/{reset.pk}/undo/")
    apply(as_operator, undo)
    assert committed(billing) == [3, 4]


def test_the_offsets_of_an_unknown_group_are_a_form_error(as_operator, billing):
    response = preview(as_operator, mode="group", source="nobody")

    errors = response.context["reset_form"].non_field_errors()
    assert errors == ["group 'nobody' has no committed offsets on 'orders' to copy"]


def test_the_group_mode_needs_a_source(as_operator, billing):
    response = preview(as_operator, mode="group")

    assert "source" in response.context["reset_form"].errors


# Roles


def test_anonymous_preview_is_sent_to_login(client, billing):
    response = client.post(PREVIEW, {"topic": "orders", "mode": "earliest"})

    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


def test_viewer_cannot_preview(as_viewer, billing):
    assert preview(as_viewer, mode="earliest").status_code == 403


def test_viewer_apply_is_403_and_changes_nothing(as_viewer, as_operator, billing):
    previewed = preview(as_operator, mode="earliest")

    response = apply(as_viewer, previewed)

    assert response.status_code == 403
    assert committed(billing) == [3, 4]
    assert not AuditEntry.objects.exists()


def test_preview_apply_and_again_send_a_get_back_to_the_reset_form(as_operator, billing):
    for url in (PREVIEW, APPLY, AGAIN):
        response = as_operator.get(url)
        assert (response.status_code, response["Location"]) == (303, "/groups/billing/#reset")


def test_reset_pages_of_an_unknown_group_are_404(as_operator, billing):
    assert as_operator.post("/groups/nope/reset/preview/", {"mode": "latest"}).status_code == 404
    assert as_operator.post("/groups/nope/reset/apply/", {"token": "x"}).status_code == 404
    assert as_operator.post("/groups/nope/reset/again/", {"token": "x"}).status_code == 404


# A big topic

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
    assert f"{BIG:,} of {BIG:,}" in page
    assert f"listed below are the first {LISTED_QUEUES:,} that move" in page
    assert page.count('class="tm-reset-moves"') == LISTED_QUEUES
    assert response.context["consumed_again"] == 2 * BIG


def test_a_big_topics_reset_moves_every_queue_and_is_undone_whole(as_operator, wide):
    response = apply(
        as_operator, as_operator.post(PREVIEW, {"topic": "wide", "mode": "earliest"}), follow=True
    )

    assert set(wide.committed_offsets("billing", "wide").values()) == {0}
    assert any(f"{BIG:,} queues moved" in f for f in flashes(response))
    entry = AuditEntry.objects.get(action="offset.reset")
    assert len(entry.before) == LISTED_QUEUES
    assert f"{BIG} queues moved (the first {LISTED_QUEUES} listed)" in entry.detail

    reset = AppliedReset.objects.get()
    apply(as_operator, as_operator.get(f"/groups/billing/resets/{reset.pk}/undo/"))
    assert set(wide.committed_offsets("billing", "wide").values()) == {2}
