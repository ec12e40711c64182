from django.urls import path

from backend.apps.namespaces import views

urlpatterns = [
    path("namespaces/", views.NamespaceListCreateView.as_view(), name="namespace-list"),
    path("namespaces/<str:name>/", views.NamespaceDetailView.as_view(), name="namespace-detail"),
    path("namespaces/<str:name>/policy", views.NamespacePolicyView.as_view(), name="namespace-policy"),
    path(
        "namespaces/<str:name>/subscriptions",
        views.SubscriptionListCreateView.as_view(),
        name="namespace-subscriptions",
    ),
    path(
        "namespaces/<str:name>/subscriptions/<str:subscription>",
        views.SubscriptionDetailView.as_view(),
        name="namespace-subscription",
    ),
]
