from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "console.health"
    verbose_name = "Health checks"
