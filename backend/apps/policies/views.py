from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsAdmin
from backend.apps.nodes.models import StorageNode
from backend.apps.policies import selectors, services
from backend.apps.policies.serializers import PolicyChangeInputSerializer, PolicyOutputSerializer


class NodePolicyView(APIView):
    """A storage node's policy: every field's effective value and source, and whether the node enforces it;
    PATCH sets or resets the node's overrides (admin; audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="Read a node's policy", responses=PolicyOutputSerializer, tags=["policies"])
    def get(self, request: Request, name: str) -> Response:
        return Response(_node_policy_answer(get_object_or_404(StorageNode, name=name)))

    @extend_schema(
        summary="Change a node's policy",
        request=PolicyChangeInputSerializer,
        responses=PolicyOutputSerializer,
        tags=["policies"],
    )
    def patch(self, request: Request, name: str) -> Response:
        node = get_object_or_404(StorageNode, name=name)
        change = PolicyChangeInputSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        node = services.update_node_policy(
            actor=request.user, node=node, set_=change.validated_data["set"], reset=change.validated_data["reset"]
        )
        return Response(_node_policy_answer(node))


def _node_policy_answer(node: StorageNode) -> dict[str, object]:
    """The effective node policy per field, and whether the node enforces it (and at which version)."""
    return {
        "fields": selectors.node_policy_view(node),
        "sync_state": node.policy_sync_state,
        "sync_error": node.policy_sync_error,
        "version": node.policy_version,
    }
