"""Tidemark console URLs."""

from django.contrib import admin
from django.urls import include, path

from console.monitoring.scrape import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("console.accounts.urls")),
    path("audit/", include("console.audit.urls")),
    path("topics/", include("console.topics.urls")),
    path("messages/", include("console.messages.urls")),
    path("streams/", include("console.streams.urls")),
    path("storage/", include("console.storage.urls")),
    path("groups/", include("console.groups.urls")),
    path("alerts/", include("console.alerts.urls")),
    path("tasks/", include("console.background.urls")),
    path("monitoring/", include("console.monitoring.urls")),
    path("api/", include("console.api.urls")),
    path("metrics", metrics, name="metrics"),
    path("", include("console.health.urls")),
    path("", include("console.core.urls")),
]
