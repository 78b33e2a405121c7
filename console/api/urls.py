"""/api/: v1 resources, the OpenAPI schema and its docs page; JSON 404 for the rest."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from console.api import converters  # noqa: F401  (registers <name:...>)
from console.api.errors import not_found
from console.api.views import alerts, audit, groups, messages, storage, streams, tasks, topics

v1 = [
    *topics.urlpatterns,
    *messages.urlpatterns,
    *streams.urlpatterns,
    *groups.urlpatterns,
    *storage.urlpatterns,
    *audit.urlpatterns,
    *alerts.urlpatterns,
    *tasks.urlpatterns,
]

urlpatterns = [
    path("v1/", include(v1)),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # GET only: its HTML renderer has no template for an OPTIONS answer (that was a 500).
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", http_method_names=["get", "head"]),
        name="api-docs",
    ),
    re_path(r"^[\s\S]*$", not_found),  # [\s\S]: a path holding a newline is a JSON 404 too
]
