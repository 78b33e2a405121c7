"""Login, logout and password views under /accounts/; the user pages (admins only)."""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from console.accounts import passwords, role_pages, throttle, tokens, users

urlpatterns = [
    # Logout stays reachable without a session (an expired session's logout button must not
    # bounce through the login page); Django's LogoutView is not marked that way itself.
    path("logout/", login_not_required(auth_views.LogoutView.as_view()), name="logout"),
    path("users/", users.user_list, name="user_list"),
    path("users/unlock/", users.user_unlock, name="user_unlock"),
    path("users/<int:user_id>/", users.user_action, name="user_action"),
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
