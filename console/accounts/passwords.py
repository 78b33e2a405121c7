"""Django's login, password change and reset-confirm pages, writing an audit row on success."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from console.accounts.access_audit import logged_in, password_changed


class AuditedLoginView(auth_views.LoginView):
    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        logged_in(self.request, form.get_user())
        return response


class AuditedPasswordChangeView(auth_views.PasswordChangeView):
    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        password_changed(self.request, form.user, "changed by the user on the password page")
        return response


class AuditedPasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        password_changed(self.request, form.user, "set through a password-reset mail")
        return response
