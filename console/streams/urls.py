from django.urls import path

from console.streams import views

app_name = "streams"

urlpatterns = [
    path("", views.stream_page, name="stream"),
]
