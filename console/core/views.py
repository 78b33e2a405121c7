from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.accounts.roles import require_role


@login_not_required
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness check for load balancers and scripts; needs no login."""
    return JsonResponse({"status": "ok"})


@require_role("viewer")
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"store_dir": settings.TIDEMARK_STORE_DIR})
