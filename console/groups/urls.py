from django.urls import path

from console.groups import views

app_name = "groups"

urlpatterns = [
    path("", views.group_list, name="list"),
    path("<str:group>/", views.group_detail, name="detail"),
    path("<str:group>/reset/preview/", views.reset_preview, name="reset_preview"),
    path("<str:group>/reset/apply/", views.reset_apply, name="reset_apply"),
    path("<str:group>/reset/undo/", views.reset_undo, name="reset_undo"),
    path("<str:group>/dlq/", views.dlq_page, name="dlq"),
    path("<str:group>/copy/", views.copy_from, name="copy"),
    path("<str:group>/delete/", views.delete_group, name="delete"),
]
