"""API: groups (being written)."""

urlpatterns: list = []
