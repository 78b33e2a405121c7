"""Django's admin pages for users, with Tidemark's one rule for names
(console/accounts/usernames.py): adding or renaming a user to a name another user has in any
spelling is a form error there too. The admin site has no login form of its own: it sends
to the console's, so the TOTP step, the lockouts and the login audit hold for it too."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import REDIRECT_FIELD_NAME, get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from console.accounts.usernames import validate_unique_name


class _UniqueNameMixin:
    def clean_username(self) -> str:
        username = self.cleaned_data["username"]
        validate_unique_name(username, exclude_pk=self.instance.pk)
        return username


class UniqueNameCreationForm(_UniqueNameMixin, AdminUserCreationForm):
    pass


class UniqueNameChangeForm(_UniqueNameMixin, UserChangeForm):
    pass


class TidemarkUserAdmin(UserAdmin):
    add_form = UniqueNameCreationForm
    form = UniqueNameChangeForm


_User = get_user_model()
if admin.site.is_registered(_User):
    admin.site.unregister(_User)
admin.site.register(_User, TidemarkUserAdmin)


@login_not_required
def login_through_the_console(
    request: HttpRequest, extra_context: dict | None = None
) -> HttpResponse:
    """Django admin's login URL: the console's login page, back to the admin page asked for.
    A logged-in user who is no staff member is told so (403) instead of being sent round."""
    if request.user.is_authenticated:
        return render(
            request,
            "403.html",
            {"message": f"{request.user.get_username()} is not a Django admin (staff) account."},
            status=403,
        )
    return redirect_to_login(request.GET.get(REDIRECT_FIELD_NAME) or reverse("admin:index"))


admin.site.login = login_through_the_console
