"""ASGI entry point for the Tidemark console."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

application = get_asgi_application()
