from django.urls import path

from console.groups import bulk_reset, dlq_views, reset_views, views

app_name = "groups"

urlpatterns = [
    path("", views.group_list, name="list"),
    # Two parts: no group's own URL has this shape.
    path("selected/reset/", bulk_reset.reset_selected, name="reset_selected"),
    path("<str:group>/", views.group_detail, name="detail"),
    path("<str:group>/reset/preview/", reset_views.reset_preview, name="reset_preview"),
    path("<str:group>/reset/apply/", reset_views.reset_apply, name="reset_apply"),
    path("<str:group>/reset/again/", reset_views.reset_again, name="reset_again"),
    path("<str:group>/resets/", reset_views.reset_list, name="resets"),
    path("<str:group>/resets/<int:reset>/undo/", reset_views.reset_undo, name="reset_undo"),
    path("<str:group>/dlq/", dlq_views.dlq_page, name="dlq"),
    path("<str:group>/delete/", views.delete_group, name="delete"),
]
