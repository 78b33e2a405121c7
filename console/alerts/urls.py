from django.urls import path

from console.alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.index, name="index"),
    path("rules/new/", views.rule_create, name="rule_create"),
    path("rules/<int:rule_id>/", views.rule_edit, name="rule_edit"),
    path("rules/<int:rule_id>/action/", views.rule_action, name="rule_action"),
    path("silences/new/", views.silence_create, name="silence_create"),
    path("silences/<int:silence_id>/expire/", views.silence_expire, name="silence_expire"),
    path("test-email/", views.test_email, name="test_email"),
]
