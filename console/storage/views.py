"""/storage/: segments, disk use against the thresholds, settings, last recovery and
retention reports. Read-only: retention runs from the background tasks."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.core.store import get_store
from console.storage.visibility import visible_retention
from storeadapter.disk_use import disk_use
from storeadapter.summaries import segment_rows


@require_safe
def storage(request: HttpRequest) -> HttpResponse:
    store = get_store()
    stats = store.stats(topics=False)
    disk = disk_use(store)
    context = {
        "segments": segment_rows(store, stats),
        "stats": stats,
        "disk": disk,
        "thresholds": [
            (name, round(ratio * 100), meaning) for name, ratio, meaning in disk.thresholds()
        ],
        "over": disk.over(),
        "config": store.config,
        "recovery": stats.last_recovery,
        "retention": visible_retention(request.user, stats.last_retention),
    }
    return render(request, "storage/page.html", context)
