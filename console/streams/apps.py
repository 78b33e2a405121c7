from django.apps import AppConfig


class StreamsConfig(AppConfig):
    """The event streams page (/streams/): find a stream, page through its events."""

    name = "console.streams"
    verbose_name = "Streams"
