from django.urls import path

from console.storage import views

app_name = "storage"

urlpatterns = [path("", views.storage, name="page")]
