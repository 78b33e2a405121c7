"""API: storage (being written)."""

urlpatterns: list = []
