from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsAdmin
from backend.apps.nodes import services
from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.serializers import NodeInputSerializer, NodeOutputSerializer


class NodeListCreateView(APIView):
    """The registered storage nodes (any role; a node's token is never shown); register one (admin; audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="List storage nodes", responses=NodeOutputSerializer(many=True), tags=["nodes"])
    def get(self, request: Request) -> Response:
        return Response(NodeOutputSerializer(StorageNode.objects.order_by("name"), many=True).data)

    @extend_schema(
        summary="Register a storage node",
        description="Its URL must be allowed by OUTGOING_URL_ALLOW (admin; audited).",
        request=NodeInputSerializer,
        responses={201: NodeOutputSerializer},
        tags=["nodes"],
    )
    def post(self, request: Request) -> Response:
        data = NodeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        node = services.create_node(actor=request.user, **data.validated_data)
        return Response(NodeOutputSerializer(node).data, status=status.HTTP_201_CREATED)


class NodeDetailView(APIView):
    """One registered storage node: read it (any role), change or remove it (admin; audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="Read a storage node", responses=NodeOutputSerializer, tags=["nodes"])
    def get(self, request: Request, name: str) -> Response:
        return Response(NodeOutputSerializer(get_object_or_404(StorageNode, name=name)).data)

    @extend_schema(
        summary="Change a storage node",
        description="Only the fields given change; a changed URL needs the token again (admin; audited).",
        request=NodeInputSerializer,
        responses=NodeOutputSerializer,
        tags=["nodes"],
    )
    def patch(self, request: Request, name: str) -> Response:
        node = get_object_or_404(StorageNode, name=name)
        data = NodeInputSerializer(node, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        node = services.update_node(actor=request.user, node=node, **data.validated_data)
        return Response(NodeOutputSerializer(node).data)

    @extend_schema(
        summary="Remove a storage node",
        description="Refused (400, `name`) while it hosts namespaces; its data is not touched (admin; audited).",
        responses={204: None},
        tags=["nodes"],
    )
    def delete(self, request: Request, name: str) -> Response:
        services.delete_node(actor=request.user, node=get_object_or_404(StorageNode, name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)
