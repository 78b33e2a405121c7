"""``stats().last_recovery`` is a copy of the store's report, made once per report: a
caller changing it does not change the store's, and a new report shows at the next call."""

from __future__ import annotations

from storeadapter.engine.recovery import RecoveryReport


def test_changing_the_report_stats_gave_leaves_the_stores_own(open_store):
    store = open_store()

    store.stats().last_recovery.corruptions.append("not the store's")

    assert store.last_recovery.corruptions == []


def test_the_same_report_is_copied_once(open_store):
    store = open_store()

    assert store.stats().last_recovery is store.stats(topics=False).last_recovery


def test_a_new_report_shows_at_the_next_stats(open_store):
    store = open_store()
    store.stats()

    store.last_recovery = RecoveryReport(clean_shutdown=False, records=7)

    report = store.stats().last_recovery
    assert (report.clean_shutdown, report.records) == (False, 7)
    assert report is not store.last_recovery
