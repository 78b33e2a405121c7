"""/accounts/tokens/: personal API tokens, created and revoked in the console.

Any user with a role creates tokens for themselves; a token acts with its user's role.
The key is shown once, on the response to the POST that made it (never cached), and is
stored only as a hash. A token may expire (30 days by default) and may be read-only; it
stops working when its user's password is changed or reset. Users revoke their own tokens;
admins see and revoke everyone's. Creating and revoking write audit rows (never the key).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from console.accounts.models import ApiToken
from console.accounts.roles import ADMIN, has_role
from console.audit.log import record
from console.core.post_only import post_only

#: Most tokens one user may hold at once.
MAX_TOKENS_PER_USER = 20


#: How long a new token may live, in days (0: until revoked).
EXPIRY_CHOICES = [(30, "30 days"), (90, "90 days"), (365, "a year"), (7, "7 days"), (0, "never")]


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, such as “deploy script”."
    )
    expires_in = forms.TypedChoiceField(
        label="Expires in",
        choices=EXPIRY_CHOICES,
        coerce=int,
        initial=30,
        required=False,
        empty_value=30,
    )
    read_only = forms.BooleanField(
        label="Read only",
        required=False,
        help_text="It may only read, whatever your role allows.",
    )

    def expires_at(self) -> datetime | None:
        days = self.cleaned_data["expires_in"]
        return timezone.now() + timedelta(days=days) if days else None


def _list_url() -> str:
    return reverse("token_list")


def _visible_tokens(request: HttpRequest):
    tokens = ApiToken.objects.select_related("user")
    if has_role(request.user, ADMIN):
        return tokens
    return tokens.filter(user=request.user)


@require_http_methods(["GET", "HEAD", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The tokens the user may see, and the form that creates one."""
    form = TokenCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if ApiToken.objects.filter(user=request.user).count() >= MAX_TOKENS_PER_USER:
            form.add_error(None, f"You hold {MAX_TOKENS_PER_USER} tokens; revoke one first.")
        else:
            token, key = ApiToken.issue(
                request.user,
                form.cleaned_data["name"],
                expires_at=form.expires_at(),
                read_only=form.cleaned_data["read_only"],
            )
            record(
                request.user,
                "token.create",
                f"token {token.prefix}… of {request.user.get_username()}",
                after={
                    "name": token.name,
                    "prefix": token.prefix,
                    "expires_at": token.expires_at,
                    "read_only": token.read_only,
                },
                link=_list_url(),
            )
            response = render(request, "accounts/token_created.html", {"token": token, "key": key})
            add_never_cache_headers(response)
            return response
    now = timezone.now()
    tokens = list(_visible_tokens(request))
    for token in tokens:
        token.state_now = token.state(now)
    context = {
        "form": form,
        "tokens": tokens,
        "show_owner": has_role(request.user, ADMIN),
    }
    return render(request, "accounts/tokens.html", context, status=400 if form.errors else 200)


@post_only(lambda token_id: _list_url())
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke a token: its own user's, or anyone's for an admin."""
    token = _visible_tokens(request).filter(pk=token_id).first()
    if token is None:
        messages.error(request, "There is no such token of yours; nothing was revoked.")
        return redirect(_list_url())
    owner = token.user.get_username()
    token.delete()
    record(
        request.user,
        "token.revoke",
        f"token {token.prefix}… of {owner}",
        before={"name": token.name, "prefix": token.prefix, "user": owner},
        link=_list_url(),
    )
    messages.success(request, f"Revoked token “{token.name}” ({token.prefix}…) of {owner}.")
    return redirect(_list_url())
