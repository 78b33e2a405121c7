"""REST API v1 under /api/v1/: the console's services as JSON (Django REST framework)."""
