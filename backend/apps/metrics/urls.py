from django.urls import path

from backend.apps.metrics import views

urlpatterns = [
    path("metrics/series", views.SeriesView.as_view(), name="metrics-series"),
    path("metrics/summary", views.SummaryView.as_view(), name="metrics-summary"),
]
