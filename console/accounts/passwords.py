"""Django's login, password change and reset-confirm pages, writing an audit row on success."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.shortcuts import render

from console.accounts import login_delay, password_change_limit, sso, totp
from console.accounts.access_audit import logged_in, password_changed


class AuditedLoginView(auth_views.LoginView):
    """Django's login; a browser that logs in is remembered as known for that user
    (`login_delay`: its logins as that user are not paused). A user with TOTP is sent on to
    the code step (`totp.login_code`) instead of being logged in; with single sign-on
    configured the page links to the provider too (`sso`)."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = sso.enabled()
        context["sso_provider"] = settings.TIDEMARK_SSO_PROVIDER_NAME
        return context

    def form_valid(self, form) -> HttpResponse:
        if totp.has_totp(form.get_user()):
            return totp.ask_for_code(self.request, form.get_user(), self.get_redirect_url())
        response = super().form_valid(form)
        user = form.get_user()
        logged_in(self.request, user)
        login_delay.remember_browser(response, user.get_username())
        return response


class AuditedPasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change, refusing (429) a user past the limit of wrong current
    passwords (`password_change_limit`)."""

    def post(self, request, *args, **kwargs) -> HttpResponse:
        seconds = password_change_limit.seconds_refused(request.user.pk)
        if seconds:
            return self._refused(seconds)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        if "old_password" in form.errors:
            password_change_limit.note_failure(self.request.user.pk)
        return super().form_invalid(form)

    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        password_change_limit.clear(form.user.pk)
        password_changed(self.request, form.user, "changed by the user on the password page")
        return response

    def _refused(self, seconds: int) -> HttpResponse:
        response = render(
            self.request,
            "registration/password_change_refused.html",
            {"seconds": seconds, "limit": settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT},
            status=429,
        )
        response["Retry-After"] = str(seconds)
        return response


class AuditedPasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        password_changed(self.request, form.user, "set through a password-reset mail")
        return response
