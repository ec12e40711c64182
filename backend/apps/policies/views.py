from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsAdmin
from backend.apps.policies import selectors, services
from backend.apps.policies.serializers import PolicyChangeInputSerializer, PolicyOutputSerializer


class ClusterPolicyView(APIView):
    """The cluster default policy: every field's effective value and source."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=PolicyOutputSerializer, tags=["policies"])
    def get(self, request: Request) -> Response:
        return Response({"fields": selectors.cluster_policy_view()})

    @extend_schema(request=PolicyChangeInputSerializer, responses=PolicyOutputSerializer, tags=["policies"])
    def patch(self, request: Request) -> Response:
        change = PolicyChangeInputSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        services.update_cluster_policy(
            actor=request.user, set_=change.validated_data["set"], reset=change.validated_data["reset"]
        )
        return Response({"fields": selectors.cluster_policy_view()})
