"""/monitoring/charts/<kind>/: a Plotly figure of the sampled history, as JSON.

Kinds: ``dashboard`` (produce and consume rates, total backlog), ``group`` (``?group=``: lag
per queue stacked, lag in seconds, drain time, status), ``topic`` (``?topic=``: append rate,
size), ``topic-history`` (``?topic=``: messages and bytes per minute from the Spark
statistics job) and ``storage`` (disk use against the thresholds). ``?range=`` is one of 1h,
6h, 24h, 7d, 30d and 90d (default 1h). Viewer role; mistakes are
answered with a JSON sentence (400 for a bad range or a missing name, 404 for an unknown
kind; a group or topic not sampled yet gets an empty chart that says so). The store-wide
``dashboard`` chart is refused (403) to a scoped role, which sees only some topics and groups.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from console.accounts.permissions import GROUP, TOPIC, viewable
from console.monitoring import charts


def _error(status: int, sentence: str) -> JsonResponse:
    return JsonResponse({"error": sentence}, status=status)


@require_http_methods(["GET", "HEAD"])
@never_cache
def chart(request: HttpRequest, kind: str) -> HttpResponse:
    if kind not in charts.KINDS:
        return _error(404, f"There is no {kind!r} chart; the charts are {', '.join(charts.KINDS)}.")
    range_name = request.GET.get("range", "1h")
    ranges = charts.HISTORY_RANGES if kind == "topic-history" else charts.RANGES
    if range_name not in ranges:
        return _error(
            400,
            f"The range {range_name!r} is not offered; choose one of {', '.join(ranges)}.",
        )
    if kind == "dashboard":
        if viewable(request.user, TOPIC) is not None or viewable(request.user, GROUP) is not None:
            return _error(
                403,
                "The store's history charts every team's traffic; your roles see some topics "
                "and groups: their charts are on the topic and group pages.",
            )
        figure = charts.dashboard_figure(range_name)
    elif kind == "storage":
        figure = charts.storage_figure(range_name)
    elif kind == "group":
        group = request.GET.get("group", "")
        if not group:
            return _error(400, "Say which group to chart: ?group=<name>.")
        figure = charts.group_figure(group, range_name)
    else:
        topic = request.GET.get("topic", "")
        if not topic:
            return _error(400, "Say which topic to chart: ?topic=<name>.")
        if kind == "topic-history":
            figure = charts.topic_history_figure(topic, range_name)
        else:
            figure = charts.topic_figure(topic, range_name)
    return HttpResponse(figure.to_json(), content_type="application/json")
