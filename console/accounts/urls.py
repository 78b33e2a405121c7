"""Login, logout and password views under /accounts/; the user pages (admins only)."""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from console.accounts import (
    account,
    passwords,
    role_pages,
    sso_views,
    throttle,
    tokens,
    totp,
    users,
)

urlpatterns = [
    # Logout stays reachable without a session (an expired session's logout button must not
    # bounce through the login page); Django's LogoutView is not marked that way itself.
    path("logout/", login_not_required(auth_views.LogoutView.as_view()), name="logout"),
    path("users/", users.user_list, name="user_list"),
    path("users/unlock/", users.user_unlock, name="user_unlock"),
    path("users/<int:user_id>/", users.user_action, name="user_action"),
    path("account/", account.account_page, name="account"),
    path("account/totp/", account.totp_setup, name="totp_setup"),
    path("account/totp/confirm/", account.totp_confirm, name="totp_confirm"),
    path("account/totp/remove/", account.totp_remove, name="totp_remove"),
    # The second step of a login with TOTP; single sign-on (404 while not configured).
    path("login/code/", totp.login_code, name="login_code"),
    path("sso/start/", sso_views.sso_start, name="sso_start"),
    path("sso/callback/", sso_views.sso_callback, name="sso_callback"),
    path("roles/", role_pages.role_list, name="role_list"),
    path("tokens/", tokens.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token_revoke"),
    # Before Django's own: the same page, with an hourly limit of mails.
    path(
        "password_reset/",
        throttle.ThrottledPasswordResetView.as_view(),
        name="password_reset",
    ),
    # Before Django's own: the same pages, writing an audit row on a login or a new password.
    path("login/", passwords.AuditedLoginView.as_view(), name="login"),
    path(
        "password_change/",
        passwords.AuditedPasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "reset/<uidb64>/<token>/",
        passwords.AuditedPasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("", include("django.contrib.auth.urls")),
]
