from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.filters import OrderingFilter
from rest_framework.generics import ListAPIView
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.catalog import selectors, services
from backend.apps.catalog.filters import SegmentFilter
from backend.apps.catalog.serializers import (
    NamespaceListOutputSerializer,
    NamespaceSummaryOutputSerializer,
    SegmentOutputSerializer,
    SyncResultOutputSerializer,
)
from backend.apps.core.pagination import cursor_page
from backend.apps.core.permissions import IsAdmin, IsOperator
from backend.apps.namespaces import services as namespace_services
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import namespace_list
from backend.apps.namespaces.serializers import NamespaceInputSerializer, NamespaceOutputSerializer


@extend_schema(tags=["segments"])
class SegmentListView(ListAPIView):
    """Every segment across namespaces; filter, order and page by cursor (fast at a million rows)."""

    serializer_class = SegmentOutputSerializer
    pagination_class = cursor_page(("namespace_id", "shard", "base_offset", "id"))
    filterset_class = SegmentFilter
    filter_backends = [*ListAPIView.filter_backends, OrderingFilter]
    ordering_fields = ["size_bytes", "max_timestamp", "expired_ratio", "base_offset", "id"]

    def get_queryset(self):
        return selectors.segment_list()


class NamespaceSummaryView(APIView):
    """A namespace's figures: its shards' engine figures summed, ratios of the sums."""

    @extend_schema(summary="A namespace's figures", responses=NamespaceSummaryOutputSerializer, tags=["namespaces"])
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(selectors.with_usage(namespace_list()), name=name)
        return Response(NamespaceSummaryOutputSerializer(selectors.namespace_summary(namespace)).data)


class NamespaceSyncView(APIView):
    """Sync this namespace's segment catalog from its node now."""

    permission_classes = [IsOperator]

    @extend_schema(request=None, responses=SyncResultOutputSerializer, tags=["segments"])
    def post(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        return Response(asdict(services.sync_namespace(namespace)))


@extend_schema(tags=["namespaces"])
class NamespaceListCreateView(ListAPIView):
    """Namespaces with their usage from the catalog (GET, any role); create one (POST, admin, by the
    namespaces app's service)."""

    permission_classes = [IsAdmin]
    serializer_class = NamespaceListOutputSerializer
    pagination_class = cursor_page("name")
    parser_classes = [JSONParser]  # a placement lists up to 1,024 nodes: more fields than a form may carry

    def get_queryset(self):
        return selectors.namespace_list_with_usage()

    @extend_schema(request=NamespaceInputSerializer, responses={201: NamespaceOutputSerializer}, tags=["namespaces"])
    def post(self, request: Request) -> Response:
        serializer = NamespaceInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        namespace = namespace_services.create_namespace(actor=request.user, **serializer.validated_data)
        return Response(NamespaceOutputSerializer(namespace).data, status=status.HTTP_201_CREATED)
