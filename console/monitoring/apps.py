from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "console.monitoring"
    label = "monitoring"
