from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.http import require_safe

from console.accounts.permissions import GROUP, TOPIC, viewable, visible_groups
from console.core.store import get_store
from console.monitoring import current, scale
from storeadapter.disk_use import disk_use
from storeadapter.summaries import group_summaries, store_totals


@login_not_required
@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask every site for /favicon.ico: the console's icon (a static SVG)."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard: the store at a glance and the groups furthest behind (a big topic's
    messages and lag as last sampled: see console/monitoring/scale.py)."""
    store = get_store()
    stats = store.stats(topics=False)
    disk = disk_use(store)
    figures = scale.SampledFigures()
    # A scoped role counts the topics and groups it may view (console/accounts/
    # permissions.py); the disk, flushes and recovery stay the store's own.
    topics = viewable(request.user, TOPIC)
    totals = store_totals(store, figures, only=topics)
    groups = visible_groups(
        request.user, group_summaries(store, with_queues=False, figures=figures)
    )
    samples = current.latest_two()  # one look-up for the metrics, rates and freshness
    metrics = {m.group: m for m in current.group_metrics(samples)}
    store_wide = topics is None and viewable(request.user, GROUP) is None
    if store_wide:
        rates = current.store_metrics(samples)
    else:
        seen = [metrics[g.group] for g in groups if g.group in metrics]
        rates = current.scoped_store_metrics(topics or (lambda name: True), seen, samples)
    context = {
        "stats": stats,
        "disk": disk,
        "warn_percent": round(disk.warn_ratio * 100),
        "topics": totals.topics,
        "queues": totals.queues,
        "message_count": totals.messages,
        "group_count": len(groups),
        "backlog": sum(g.lag for g in groups),
        "behind": [(g, metrics.get(g.group)) for g in groups[:5]],
        "rates": rates,
        # The store's history charts every team's traffic: not for a scoped role.
        "store_chart": store_wide,
        "sample_interval_s": settings.TIDEMARK_SAMPLE_INTERVAL_S,
        "latest_sample_ms": samples[0].ts_ms if samples[0] is not None else None,
        "recovery": stats.last_recovery,
        "retention": stats.last_retention,
    }
    return render(request, "home.html", context)
