"""URL converters of the API: ``<name:topic>`` and ``<name:group>``."""

from django.urls import register_converter


class NameConverter:
    """Characters a topic or group name may hold (the engine checks the rest): anything
    else in that part of the URL is a 404 without reaching a view."""

    regex = r"[A-Za-z0-9._%-]{1,140}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(NameConverter, "name")
