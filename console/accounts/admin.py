"""Django's admin pages for users, with Tidemark's one rule for names
(console/accounts/usernames.py): adding or renaming a user to a name another user has in any
spelling is a form error there too."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

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
