"""API: audit (being written)."""

urlpatterns: list = []
