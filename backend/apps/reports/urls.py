from django.urls import path

from backend.apps.reports import views

urlpatterns = [
    path("reports/lifecycle", views.LifecycleReportPostView.as_view(), name="report-lifecycle"),
    path(
        "namespaces/<str:name>/reports/lifecycle",
        views.NamespaceLifecycleReportView.as_view(),
        name="namespace-report-lifecycle",
    ),
    path(
        "namespaces/<str:name>/reports/lifecycle/summary",
        views.NamespaceLifecycleReportSummaryView.as_view(),
        name="namespace-report-lifecycle-summary",
    ),
    path("spark-jobs", views.SparkJobStartView.as_view(), name="spark-job-start"),
]
