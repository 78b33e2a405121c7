"""/healthz (the process answers) and /readyz (the store and database answer), for load
balancers; /healthz/background (Redis and a worker answer), for monitors."""

from django.urls import path

from console.health import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("healthz/background", views.background, name="healthz-background"),
]
