from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Home page, health check and project-wide management commands."""

    name = "console.core"
    label = "core"
    verbose_name = "Tidemark core"
