from django.urls import path

from backend.apps.policies.views import ClusterPolicyView

urlpatterns = [path("policies/cluster", ClusterPolicyView.as_view(), name="cluster-policy")]
