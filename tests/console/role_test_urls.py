"""A URLconf used only by tests: tiny views behind the role decorators and mixin.

Each view records an audit row when it runs, so a test can tell whether it ran.
"""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import include, path
from django.views import View

from console.accounts.roles import RoleRequiredMixin, change_requires_role, require_role
from console.audit.log import record


def _touch(request):
    record(request.user, "test.touch", f"{request.method} {request.path}")
    return HttpResponse("ran")


@change_requires_role("operator")
def operator_changes(request):
    return _touch(request)


@require_role("admin")
def admin_only(request):
    return _touch(request)


class AdminChangesView(RoleRequiredMixin, View):
    change_role = "admin"

    def get(self, request):
        return _touch(request)

    def post(self, request):
        return _touch(request)


def flash(request):
    """No role check: only the login middleware applies."""
    messages.success(request, "Topic orders created.")
    return render(request, "base.html")


urlpatterns = [
    path("t/flash/", flash),
    path("t/operator-changes/", operator_changes),
    path("t/admin-only/", admin_only),
    path("t/admin-changes/", AdminChangesView.as_view()),
    path("", include("console.urls")),
]
