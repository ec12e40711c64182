import json
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsViewer
from backend.apps.core.serializers import HealthOutputSerializer
from backend.apps.metrics import health, selectors
from backend.apps.metrics.serializers import SeriesOutputSerializer, SeriesQueryInputSerializer, SummaryOutputSerializer


class HealthView(APIView):
    """Public: the health of database, broker, node, worker and beat."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(responses=HealthOutputSerializer)
    def get(self, request: Request) -> Response:
        return Response(HealthOutputSerializer(health.system_health()).data)


class SeriesView(APIView):
    """One named series over a range, for a chart (no free-form queries)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[SeriesQueryInputSerializer], responses=SeriesOutputSerializer, tags=["metrics"])
    def get(self, request: Request) -> Response:
        query = SeriesQueryInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = selectors.series_lines(
            query.validated_data["series"],
            query.validated_data["range"],
            namespace=query.validated_data.get("namespace"),
            node=query.validated_data.get("node"),
        )
        return Response(SeriesOutputSerializer(data).data)


class SummaryView(APIView):
    """Totals from the latest collection and each node's disk, watermarks and forecast."""

    permission_classes = [IsViewer]

    @extend_schema(responses=SummaryOutputSerializer, tags=["metrics"])
    def get(self, request: Request) -> Response:
        return Response(SummaryOutputSerializer(selectors.summary()).data)


class PrometheusTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return (data if isinstance(data, str) else json.dumps(data)).encode()


class PrometheusView(APIView):
    """``GET /metrics``: Prometheus text exposition (``lcs_`` names, base units, ``_total`` counters).

    It names namespaces and nodes, so it needs a viewer: scrape with
    ``authorization: {type: Token, credentials: <token>}`` (an API token of a
    viewer account) or a session.
    """

    permission_classes = [IsViewer]
    renderer_classes = [PrometheusTextRenderer]  # errors too: their JSON body as text/plain

    @extend_schema(
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="exposition format 0.0.4")},
        tags=["metrics"],
    )
    def get(self, request: Request) -> Response:
        return Response(selectors.prometheus_text(), content_type="text/plain; version=0.0.4; charset=utf-8")
