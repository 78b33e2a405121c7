"""WSGI entry point for the Tidemark console."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

application = get_wsgi_application()

# Django's own long-lived objects (settings, URLs, templates) leave the collector's view:
# full collections then walk only what requests make, which keeps page p95s down at scale.
gc.freeze()
