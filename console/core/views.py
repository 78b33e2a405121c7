from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness check for load balancers and scripts; needs no login."""
    return JsonResponse({"status": "ok"})


@login_required
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"store_dir": settings.TIDEMARK_STORE_DIR})
