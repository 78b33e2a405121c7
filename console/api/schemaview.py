"""/api/schema/: the OpenAPI schema, made once per process, API version and language.

The schema served is the public one (``SERVE_PUBLIC``): it follows from the code and the
settings alone, not from who asks. Making it walks every view and serializer (0.2–0.6 s of
CPU), so a viewer asking for it repeatedly kept a worker busy; the made schema is kept
until a setting changes (tests override settings).
"""

from __future__ import annotations

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

_MADE: dict[tuple, dict] = {}


class SchemaView(SpectacularAPIView):
    def _get_schema_response(self, request) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language(), self.serve_public)
        schema = _MADE.get(key)
        if schema is None:
            generator = self.generator_class(
                urlconf=self.urlconf, api_version=version, patterns=self.patterns
            )
            schema = _MADE[key] = generator.get_schema(request=request, public=self.serve_public)
        filename = self._get_filename(request, version)
        return Response(
            data=schema, headers={"Content-Disposition": f'inline; filename="{filename}"'}
        )


@receiver(setting_changed)
def forget_made_schemas(**_kwargs) -> None:
    _MADE.clear()
