from django.urls import path

from backend.apps.namespaces import subscriptions, views

urlpatterns = [
    # The cluster policy is the default layer of every namespace's policy: its writes re-push namespaces.
    path("policies/cluster", views.ClusterPolicyView.as_view(), name="cluster-policy"),
    path("namespaces/<str:name>/", views.NamespaceDetailView.as_view(), name="namespace-detail"),
    path("namespaces/<str:name>/policy", views.NamespacePolicyView.as_view(), name="namespace-policy"),
    path(
        "namespaces/<str:name>/subscriptions",
        subscriptions.SubscriptionListCreateView.as_view(),
        name="namespace-subscriptions",
    ),
    path(
        "namespaces/<str:name>/subscriptions/<str:subscription>",
        subscriptions.SubscriptionDetailView.as_view(),
        name="namespace-subscription",
    ),
    path(
        "namespaces/<str:name>/subscriptions/<str:subscription>/cursor",
        subscriptions.SubscriptionCursorView.as_view(),
        name="namespace-subscription-cursor",
    ),
]
