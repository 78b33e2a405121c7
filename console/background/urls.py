from django.urls import path

from console.background import views

app_name = "background"

urlpatterns = [
    path("", views.tasks, name="tasks"),
    path("workers/", views.workers, name="workers"),
]
