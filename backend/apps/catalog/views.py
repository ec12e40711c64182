from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.filters import OrderingFilter
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.catalog import selectors, services
from backend.apps.catalog.filters import SegmentFilter
from backend.apps.catalog.serializers import (
    NamespaceSummaryOutputSerializer,
    SegmentOutputSerializer,
    SyncResultOutputSerializer,
)
from backend.apps.core.pagination import cursor_page
from backend.apps.core.permissions import IsOperator
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.selectors import namespace_list


@extend_schema(tags=["segments"])
class SegmentListView(ListAPIView):
    """Every segment across namespaces; filter, order and page by cursor (fast at a million rows)."""

    serializer_class = SegmentOutputSerializer
    pagination_class = cursor_page(("namespace_id", "shard", "base_offset", "id"))
    filterset_class = SegmentFilter
    filter_backends = [*ListAPIView.filter_backends, OrderingFilter]
    ordering_fields = ["size_bytes", "max_timestamp", "expired_ratio", "base_offset", "id"]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return selectors.segment_list()


class NamespaceSummaryView(APIView):
    @extend_schema(responses=NamespaceSummaryOutputSerializer, tags=["namespaces"])
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
