from django.urls import path

from console.core import views

urlpatterns = [
    path("", views.home, name="home"),
]
