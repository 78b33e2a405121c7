"""The Resets list and undo: every applied reset keeps what it replaced and can be undone
from the list, the message after applying and its audit row, whatever happened since."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.audit.models import AuditEntry
from console.groups.models import RESETS_KEPT, RESETS_KEPT_FOR, AppliedReset
from console.groups.resets import forget_old_resets
from tests.console.resetpages import committed, flashes, text

pytestmark = [pytest.mark.django_db]

PREVIEW = "/groups/billing/reset/preview/"
APPLY = "/groups/billing/reset/apply/"
RESETS = "/groups/billing/resets/"


def reset(client, **data) -> AppliedReset:
    previewed = client.post(PREVIEW, {"topic": "orders", **data})
    client.post(APPLY, {"token": previewed.context["token"]})
    return AppliedReset.objects.latest("id")


def undo(client, applied: AppliedReset, **kwargs):
    previewed = client.get(f"/groups/billing/resets/{applied.pk}/undo/")
    assert previewed.status_code == 200
    return client.post(APPLY, {"token": previewed.context["token"]}, **kwargs)


def test_the_undo_preview_puts_back_what_the_reset_replaced(as_operator, billing):
    applied = reset(as_operator, mode="earliest")

    previewed = as_operator.get(f"/groups/billing/resets/{applied.pk}/undo/")

    assert previewed.context["is_undo"]
    assert [(q.current, q.target) for q in previewed.context["plan"].queues] == [(0, 3), (0, 4)]
    assert f"Undo reset #{applied.pk}: preview" in text(previewed)
    assert committed(billing) == [0, 0]


def test_applying_the_undo_restores_the_offsets_and_is_audited(as_operator, billing):
    applied = reset(as_operator, mode="earliest")

    response = undo(as_operator, applied, follow=True)

    assert committed(billing) == [3, 4]
    entry = AuditEntry.objects.get(action="offset.undo")
    assert (entry.before, entry.after) == ({"0": 0, "1": 0}, {"0": 3, "1": 4})
    assert f"undo of reset #{applied.pk}" in entry.detail
    assert any(
        f"Undo of reset #{applied.pk} of billing on orders applied" in f for f in flashes(response)
    )
    assert AppliedReset.objects.get(mode="undo").undoes == applied


def test_an_older_reset_is_undone_by_its_id_not_the_latest(as_operator, billing):
    first = reset(as_operator, mode="earliest")
    reset(as_operator, mode="offset", offsets="1=2")
    assert committed(billing) == [0, 2]

    undo(as_operator, first)

    assert committed(billing) == [3, 4]


def test_a_reset_stays_undoable_after_many_consumer_commits(as_operator, billing):
    applied = reset(as_operator, mode="earliest")
    for n in range(60):  # more than the group page's history shows
        billing.commit_offset("billing", "orders", n % 2, 1 + n % 4)

    page = as_operator.get("/groups/billing/")
    undo(as_operator, applied)

    assert f"/groups/billing/resets/{applied.pk}/undo/" in page.content.decode()
    assert committed(billing) == [3, 4]


def test_an_undo_on_a_running_group_sets_the_previewed_offsets(as_operator, billing):
    applied = reset(as_operator, mode="earliest")
    previewed = as_operator.get(f"/groups/billing/resets/{applied.pk}/undo/")
    billing.commit_offset("billing", "orders", 0, 2)  # a consumer commits meanwhile

    as_operator.post(APPLY, {"token": previewed.context["token"]})

    assert committed(billing) == [3, 4]
    assert AuditEntry.objects.get(action="offset.undo").before == {"0": 2, "1": 0}


def test_the_audit_rows_link_undoes_that_reset(as_operator, billing):
    first = reset(as_operator, mode="earliest")
    reset(as_operator, mode="latest")
    entry = AuditEntry.objects.filter(action="offset.reset").earliest("id")

    previewed = as_operator.get(entry.link)

    assert previewed.context["plan"].value == first.pk
    assert [q.target for q in previewed.context["plan"].queues] == [3, 4]


def test_the_resets_list_shows_every_reset_with_its_undo(as_operator, billing):
    first = reset(as_operator, mode="earliest")
    undo(as_operator, first)
    second = AppliedReset.objects.latest("id")

    response = as_operator.get(RESETS)

    page = re.sub(r"<[^>]+>", "", text(response))
    assert response.status_code == 200
    assert [r.pk for r in response.context["resets"]] == [second.pk, first.pk]
    assert f"undo of reset #{first.pk}" in page
    assert f'href="/groups/billing/resets/{first.pk}/undo/"' in response.content.decode()
    assert "to earliest" in page


def test_viewers_see_the_resets_but_not_their_undo(as_viewer, as_operator, billing):
    applied = reset(as_operator, mode="earliest")

    response = as_viewer.get(RESETS)

    assert response.status_code == 200
    assert f"/resets/{applied.pk}/undo/" not in response.content.decode()
    assert as_viewer.get(f"/groups/billing/resets/{applied.pk}/undo/").status_code == 403


def test_the_undo_of_an_unknown_reset_is_an_error_flash(as_operator, billing):
    response = as_operator.get("/groups/billing/resets/999/undo/", follow=True)

    assert any("Nothing to undo" in f and "no reset #999" in f for f in flashes(response))


def test_a_reset_of_another_group_is_not_undone_here(as_operator, billing):
    billing.commit_offset("other", "orders", 0, 1)
    previewed = as_operator.post(
        "/groups/other/reset/preview/", {"topic": "orders", "mode": "earliest"}
    )
    as_operator.post("/groups/other/reset/apply/", {"token": previewed.context["token"]})

    response = as_operator.get(
        f"/groups/billing/resets/{AppliedReset.objects.get().pk}/undo/", follow=True
    )

    assert any("Nothing to undo" in f for f in flashes(response))


def test_a_preview_that_moves_nothing_leaves_no_reset(as_operator, billing):
    previewed = as_operator.post(PREVIEW, {"topic": "orders", "mode": "offset", "offsets": "0=1"})
    billing.commit_offset("billing", "orders", 0, 1)

    as_operator.post(APPLY, {"token": previewed.context["token"]})

    assert not AppliedReset.objects.exists()
    assert not AuditEntry.objects.exists()


def _old_resets(count: int, age: timedelta) -> None:
    when = timezone.now() - age
    AppliedReset.objects.bulk_create(
        AppliedReset(group="billing", topic="orders", mode="latest", applied_at=when)
        for _ in range(count)
    )


def test_resets_are_kept_while_among_the_latest_hundred(db):
    _old_resets(RESETS_KEPT + 5, RESETS_KEPT_FOR + timedelta(days=1))

    assert forget_old_resets("billing") == 5
    assert AppliedReset.objects.count() == RESETS_KEPT


def test_resets_younger_than_ninety_days_are_kept_however_many(db):
    _old_resets(RESETS_KEPT + 5, RESETS_KEPT_FOR - timedelta(days=1))

    assert forget_old_resets("billing") == 0
