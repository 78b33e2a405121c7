"""The Celery app: the store's upkeep and the monitoring, with Redis as the broker.

Settings come from Django's, prefixed ``CELERY_`` (console/settings.py); tasks are found in
each installed app's ``tasks`` module. Start a worker and beat with::

    celery -A console worker --loglevel=info
    celery -A console beat --loglevel=info
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("tidemark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
