"""The Tidemark console: Django project, with its Celery app loaded alongside."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
