"""Background work: Celery tasks for the store's upkeep and monitoring, and their health."""
