"""/storage/: segments, disk use against the thresholds, settings, last recovery and
retention reports. Read-only: retention runs from the background tasks."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.accounts.roles import require_role
from console.core.store import get_store
from storeadapter.summaries import segment_rows


@require_role("viewer")
@require_safe
def storage(request: HttpRequest) -> HttpResponse:
    store = get_store()
    stats = store.stats(topics=False)
    config = store.config
    thresholds = [
        ("Warning", config.disk_warn_ratio, "the oldest expired segments go first"),
        ("Force", config.disk_force_ratio, "segments go even before they expire"),
        ("Reject", config.disk_reject_ratio, "appends are refused"),
    ]
    context = {
        "segments": segment_rows(store),
        "stats": stats,
        "disk_percent": round(stats["disk_ratio"] * 100, 1),
        "thresholds": [(name, round(ratio * 100), meaning) for name, ratio, meaning in thresholds],
        "over": [name for name, ratio, _ in thresholds if stats["disk_ratio"] >= ratio],
        "config": config,
        "recovery": stats["last_recovery"],
        "retention": stats["last_retention"],
    }
    return render(request, "storage/page.html", context)
