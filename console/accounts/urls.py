"""Login, logout and password views under /accounts/."""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

urlpatterns = [
    # Logout stays reachable without a session (an expired session's logout button must not
    # bounce through the login page); Django's LogoutView is not marked that way itself.
    path("logout/", login_not_required(auth_views.LogoutView.as_view()), name="logout"),
    path("", include("django.contrib.auth.urls")),
]
