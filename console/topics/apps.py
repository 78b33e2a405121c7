from django.apps import AppConfig


class TopicsConfig(AppConfig):
    """Topics and their queues: list, create, delete, freeze, send test messages."""

    name = "console.topics"
    label = "topics"
    verbose_name = "Topics"
