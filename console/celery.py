"""The Celery app: the store's upkeep and the monitoring, with Redis as the broker.

Settings come from Django's, prefixed ``CELERY_`` (console/settings.py); tasks are found in
each installed app's ``tasks`` module. Start a worker and beat with::

    celery -A console worker --loglevel=info
    celery -A console beat --loglevel=info
"""

import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("tidemark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def use_django_logging(**kwargs) -> None:
    """Workers and beat log as the console does (settings.LOGGING: stderr, plain or JSON),
    task failures included."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
