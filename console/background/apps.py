from django.apps import AppConfig


class BackgroundConfig(AppConfig):
    name = "console.background"
    label = "background"
