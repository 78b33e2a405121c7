from django.apps import AppConfig


class MessagesConfig(AppConfig):
    """Message search, detail and export pages (/messages/).

    Labelled ``tidemark_messages`` so it does not clash with ``django.contrib.messages``.
    """

    name = "console.messages"
    label = "tidemark_messages"
    verbose_name = "Messages"
