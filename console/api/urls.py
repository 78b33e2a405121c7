"""/api/: v1 resources, the OpenAPI schema and its docs page; JSON 404 for the rest."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerSplitView

from console.accounts.roles import VIEWER, require_role
from console.api import converters  # noqa: F401  (registers <name:...>)
from console.api.errors import not_found
from console.api.schemaview import SchemaView
from console.api.views import (
    alerts,
    audit,
    dlq,
    groups,
    messages,
    resets,
    roles,
    storage,
    streams,
    tail,
    tasks,
    topics,
)

v1 = [
    *topics.urlpatterns,
    *messages.urlpatterns,
    *tail.urlpatterns,
    *streams.urlpatterns,
    *groups.urlpatterns,
    *resets.urlpatterns,
    *dlq.urlpatterns,
    *storage.urlpatterns,
    *audit.urlpatterns,
    *roles.urlpatterns,
    *alerts.urlpatterns,
    *tasks.urlpatterns,
]

urlpatterns = [
    path("v1/", include(v1)),
    # Both need a viewer's login: the schema answers 401/403 as the API does, the docs page
    # sends a browser to the login page (docs/API.md says why).
    path("schema/", SchemaView.as_view(), name="api-schema"),
    # GET only: its HTML renderer has no template for an OPTIONS answer (that was a 500).
    # The split view serves its start-up script from ?script, so no inline script is needed.
    path(
        "docs/",
        require_role(VIEWER)(
            SpectacularSwaggerSplitView.as_view(
                url_name="api-schema", http_method_names=["get", "head"]
            )
        ),
        name="api-docs",
    ),
    re_path(r"^[\s\S]*$", not_found),  # [\s\S]: a path holding a newline is a JSON 404 too
]
