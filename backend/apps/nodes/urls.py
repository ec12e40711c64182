from django.urls import path

from backend.apps.nodes import views

urlpatterns = [
    path("nodes/", views.NodeListCreateView.as_view(), name="node-list"),
    path("nodes/<str:name>/", views.NodeDetailView.as_view(), name="node-detail"),
]
