"""Issue 30, case 9 (the rest): the audit log named a time reset by its epoch
milliseconds, the group page's history said "undo of a reset #2", the silence form named
"the console's time zone", and viewers saw an Undo column they cannot use."""

from __future__ import annotations

import html

import pytest

from console.alerts.forms import SilenceForm
from console.audit.models import AuditEntry
from console.groups.models import AppliedReset
from console.monitoring import current
from console.monitoring.sampler import take_sample

pytestmark = pytest.mark.django_db

PREVIEW = "/groups/billing/reset/preview/"
APPLY = "/groups/billing/reset/apply/"


def reset(client, **data) -> AppliedReset:
    previewed = client.post(PREVIEW, {"topic": "orders", **data})
    client.post(APPLY, {"token": previewed.context["token"]})
    return AppliedReset.objects.latest("id")


def undo(client, applied: AppliedReset) -> AppliedReset:
    previewed = client.get(f"/groups/billing/resets/{applied.pk}/undo/")
    client.post(APPLY, {"token": previewed.context["token"]})
    return AppliedReset.objects.latest("id")


def test_a_time_reset_is_audited_with_its_time_in_utc(as_operator, billing):
    reset(as_operator, mode="time", when="2026-11-28T18:05:00")

    entry = AuditEntry.objects.get(action="offset.reset")

    assert "2026-11-28 18:05:00 UTC" in entry.detail
    assert "1795" not in entry.detail


def test_the_history_names_the_reset_an_undo_undid(as_operator, billing):
    first = reset(as_operator, mode="earliest")
    second = undo(as_operator, first)

    page = html.unescape(as_operator.get("/groups/billing/").content.decode())
    history = page[page.index('id="history"') :]

    assert "undo of a reset" not in history
    assert f"undo of reset #{first.pk}" in history
    assert f'#reset-{second.pk}"' in history
    assert f"reset #{first.pk} to earliest" in history


def test_the_silence_form_says_its_times_are_utc(settings):
    assert settings.TIME_ZONE == "UTC"
    help_text = SilenceForm.base_fields["ends_at"].help_text

    assert "UTC" in help_text
    assert "time zone" not in help_text


def test_a_viewer_sees_no_undo_column_on_the_resets_list(as_viewer, as_operator, billing):
    reset(as_operator, mode="earliest")

    page = as_viewer.get("/groups/billing/resets/").content.decode()

    assert ">Undo<" not in page
    assert "tm-resets" in page


def test_an_operator_keeps_the_undo_column(as_operator, billing):
    applied = reset(as_operator, mode="earliest")

    page = as_operator.get("/groups/billing/resets/").content.decode()

    assert ">Undo</th>" in page
    assert f"/groups/billing/resets/{applied.pk}/undo/" in page


def test_the_sampled_lag_has_thousands_separators(as_viewer, store):
    current._cache.update(token=None, groups=None)
    store.create_topic("bulk", 1)
    store.append_batch("bulk", [{"body": "m"} for _ in range(1200)])
    store.commit_offset("billing", "bulk", 0, 0)
    take_sample()

    page = html.unescape(as_viewer.get("/groups/billing/").content.decode())

    assert "1,200 messages from the committed offset" in page
