"""/accounts/sso/start/ and /accounts/sso/callback/: mozilla-django-oidc's views, answering
404 while single sign-on is off, and a page (403) saying why a sign-on the provider accepted
opens no console session (console/accounts/sso.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from console.accounts import sso
from console.accounts.access_audit import logged_in


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """The provider's answer: a session on success (audited as a login), else a page."""

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        logged_in(self.request, self.user, how=f"through {settings.TIDEMARK_SSO_PROVIDER_NAME}")
        return response

    def login_failure(self) -> HttpResponse:
        refusal = getattr(self.request, "sso_refusal", None)
        response = render(
            self.request,
            "registration/sso_refused.html",
            {
                "refusal": refusal,
                "provider": settings.TIDEMARK_SSO_PROVIDER_NAME,
                "error": self.request.GET.get("error", ""),
            },
            status=403,
        )
        add_never_cache_headers(response)
        return response


def _when_enabled(view):
    @login_not_required
    def wrapper(request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        if not sso.enabled():
            raise Http404("Single sign-on is not configured.")
        return view(request)

    return wrapper


sso_start = _when_enabled(OIDCAuthenticationRequestView.as_view())
sso_callback = _when_enabled(SsoCallbackView.as_view())
