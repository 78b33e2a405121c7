from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "console.storage"
    label = "storage"
