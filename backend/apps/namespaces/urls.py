from django.urls import path

from backend.apps.namespaces.views import NamespaceListCreateView

urlpatterns = [path("namespaces/", NamespaceListCreateView.as_view(), name="namespace-list")]
