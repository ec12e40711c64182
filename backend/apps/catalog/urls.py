from django.urls import path

from backend.apps.catalog import views

urlpatterns = [
    path("namespaces/", views.NamespaceListCreateView.as_view(), name="namespace-list"),
    path("segments/", views.SegmentListView.as_view(), name="segment-list"),
    path("namespaces/<str:name>/summary", views.NamespaceSummaryView.as_view(), name="namespace-summary"),
    path("namespaces/<str:name>/sync", views.NamespaceSyncView.as_view(), name="namespace-sync"),
]
