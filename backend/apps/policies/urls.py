from django.urls import path

from backend.apps.policies.views import NodePolicyView

urlpatterns = [path("nodes/<str:name>/policy", NodePolicyView.as_view(), name="node-policy")]
