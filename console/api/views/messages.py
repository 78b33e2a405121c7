"""API: messages (being written)."""

urlpatterns: list = []
