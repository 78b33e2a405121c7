from django.urls import path

from console.messages import views

app_name = "messages"

urlpatterns = [
    path("", views.message_search, name="search"),
    path("export/", views.message_export, name="export"),
    path("<str:message_id>/", views.message_detail, name="detail"),
    path("<str:message_id>/body", views.message_body, name="body"),
]
