from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsOperator
from backend.apps.lifecycle import services
from backend.apps.lifecycle.actions import ACTIONS
from backend.apps.lifecycle.serializers import (
    ActionOutputSerializer,
    NamespaceActionInputSerializer,
    NodeActionInputSerializer,
)
from backend.apps.namespaces.models import Namespace
from backend.apps.nodes.models import StorageNode
from backend.apps.runs.serializers import TaskRunOutputSerializer


class ActionListView(APIView):
    """Every lifecycle action an operator may start, with what it does (the console's buttons)."""

    @extend_schema(responses=ActionOutputSerializer(many=True), tags=["actions"])
    def get(self, request: Request) -> Response:
        return Response(ActionOutputSerializer(list(ACTIONS.values()), many=True).data)


class NamespaceActionView(APIView):
    """Run a lifecycle action on the namespace now (or a dry run of it); answers the task run to poll."""

    permission_classes = [IsOperator]

    @extend_schema(request=NamespaceActionInputSerializer, responses={202: TaskRunOutputSerializer}, tags=["actions"])
    def post(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        data = NamespaceActionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.start_action(
            kind=data.validated_data["action"],
            actor=request.user,
            namespace=namespace,
            shard=data.validated_data["shard"],
            confirm=data.validated_data["confirm"],
            dry_run=data.validated_data["dry_run"],
        )
        return Response(TaskRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class NodeActionView(APIView):
    """Run file cleaning, a disk check or a manual (forced) delete on a node now (or a dry run); answers the run."""

    permission_classes = [IsOperator]

    @extend_schema(request=NodeActionInputSerializer, responses={202: TaskRunOutputSerializer}, tags=["actions"])
    def post(self, request: Request, name: str) -> Response:
        node = get_object_or_404(StorageNode, name=name)
        data = NodeActionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.start_action(
            kind=data.validated_data["action"],
            actor=request.user,
            node=node,
            confirm=data.validated_data["confirm"],
            dry_run=data.validated_data["dry_run"],
        )
        return Response(TaskRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class CompactionEstimateOutputSerializer(serializers.Serializer):
    bytes_before = serializers.IntegerField()
    bytes_after = serializers.IntegerField()
    reclaimable_bytes = serializers.IntegerField()
    records_removable = serializers.IntegerField()
    active_records_removable = serializers.IntegerField(
        help_text="Of records_removable, those that wait for the active segment to roll (the rest go now)"
    )
    active_bytes_reclaimable = serializers.IntegerField(
        help_text="Of reclaimable_bytes, those that wait for the active segment to roll"
    )


class CompactionEstimateView(APIView):
    """What compacting the namespace now would reclaim (a dry run on the node; nothing changes)."""

    @extend_schema(responses=CompactionEstimateOutputSerializer, tags=["actions"])
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        return Response(CompactionEstimateOutputSerializer(services.compaction_estimate(namespace)).data)
