"""The user pages' forms: create a user, change a user's role."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.core.validators import MaxLengthValidator

from console.accounts.roles import ROLES, VIEWER
from console.accounts.usernames import validate_unique_name

ROLE_CHOICES = [(role, role.capitalize()) for role in ROLES]


def _username_field() -> forms.CharField:
    """A form field with the user model's own username rules (length, allowed characters)."""
    model = get_user_model()
    model_field = model._meta.get_field(model.USERNAME_FIELD)
    return forms.CharField(
        label="Username",
        max_length=model_field.max_length,
        # Not the model's MaxLengthValidator: max_length adds one, and the error would show twice.
        validators=[v for v in model_field.validators if not isinstance(v, MaxLengthValidator)],
        help_text=model_field.help_text,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class UserCreateForm(forms.Form):
    """A new user; the view generates the password."""

    username = _username_field()
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=VIEWER)
    email = forms.EmailField(required=False, label="Email (optional)")

    def clean_username(self) -> str:
        username = self.cleaned_data["username"]
        validate_unique_name(username)
        return get_user_model().normalize_username(username)


class UserRoleForm(forms.Form):
    """The role a user's role group is replaced with."""

    role = forms.ChoiceField(choices=ROLE_CHOICES)
