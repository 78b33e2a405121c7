from django.urls import path

from console.topics import bulk, views

app_name = "topics"

urlpatterns = [
    path("", views.topic_list, name="list"),
    # Two parts: no topic's own URL has this shape.
    path("selected/delete/", bulk.delete_selected, name="delete_selected"),
    path("<str:topic>/", views.topic_detail, name="detail"),
    path("<str:topic>/tail/", views.topic_tail, name="tail"),
]
