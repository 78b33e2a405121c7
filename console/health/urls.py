"""/healthz (the process answers) and /readyz (its dependencies answer), for load balancers."""

from django.urls import path

from console.health import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
