from django.apps import AppConfig


class GroupsConfig(AppConfig):
    """Consumer groups: lag per queue, members, offset resets with undo, dead letters."""

    name = "console.groups"
    label = "groups"
    verbose_name = "Consumer groups"
