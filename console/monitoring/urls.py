from django.urls import path

from console.monitoring import views

app_name = "monitoring"

urlpatterns = [
    path("charts/<str:kind>/", views.chart, name="chart"),
]
