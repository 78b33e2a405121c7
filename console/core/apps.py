from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Home page, health check and project-wide management commands."""

    name = "console.core"
    label = "core"
    verbose_name = "Tidemark core"

    def ready(self) -> None:
        from django.core import checks

        from console.core import checks as tidemark_checks

        checks.register(tidemark_checks.metrics_exposure, checks.Tags.security)
        checks.register(tidemark_checks.secret_key_placeholder, checks.Tags.security)
        checks.register(tidemark_checks.single_sign_on, checks.Tags.security)
