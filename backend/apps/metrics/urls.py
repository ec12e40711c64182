from django.urls import path

from backend.apps.metrics import views

urlpatterns = [
    path("health", views.HealthView.as_view(), name="health"),
    path("metrics/series", views.SeriesView.as_view(), name="metrics-series"),
    path("metrics/summary", views.SummaryView.as_view(), name="metrics-summary"),
]
