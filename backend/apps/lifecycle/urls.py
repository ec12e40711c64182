from django.urls import path

from backend.apps.lifecycle import views

urlpatterns = [
    path("actions", views.ActionListView.as_view(), name="actions"),
    path("namespaces/<str:name>/actions", views.NamespaceActionView.as_view(), name="namespace-actions"),
    path("nodes/<str:name>/actions", views.NodeActionView.as_view(), name="node-actions"),
    path(
        "namespaces/<str:name>/compaction-estimate",
        views.CompactionEstimateView.as_view(),
        name="namespace-compaction-estimate",
    ),
]
