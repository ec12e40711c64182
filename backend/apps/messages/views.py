from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsOperator
from backend.apps.core.problems import ProblemResponse, engine_problem
from backend.apps.core.schema import problems
from backend.apps.messages import services
from backend.apps.messages.browser import browse, with_effective_expiry
from backend.apps.messages.serializers import (
    BrowseInputSerializer,
    BrowseOutputSerializer,
    NodeRefusalSerializer,
    OutOfRangeSerializer,
    ProduceInputSerializer,
    ProduceOutputSerializer,
)
from backend.apps.namespaces.models import Namespace
from storage_engine.errors import OffsetOutOfRangeError


def out_of_range(request: Request, exc: OffsetOutOfRangeError) -> Response:
    """416 problem details with both bounds, and words the browser shows as they are."""
    below = exc.offset < exc.log_start_offset
    detail = (
        f"offset {exc.offset} is below the log start {exc.log_start_offset} of shard {exc.shard} "
        "(deleted by retention/expiry)"
        if below
        else f"offset {exc.offset} is past the end of shard {exc.shard} (end offset {exc.end_offset})"
    )
    http_status, body = engine_problem(exc, request.path)
    body.update(detail=detail, below_log_start=below)
    return ProblemResponse(body, status=http_status)


class MessageBrowseView(APIView):
    """Browse a namespace's records (GET, any role); produce a test message (POST, operator)."""

    permission_classes = [IsOperator]
    parser_classes = [JSONParser]

    @extend_schema(
        parameters=[BrowseInputSerializer],
        responses={
            200: BrowseOutputSerializer,
            **problems(
                {416: "below the log start or past the end (offset_out_of_range): both bounds"}, OutOfRangeSerializer
            ),
            **problems({503: "the node hosting the shard could not be reached"}),
        },
        tags=["messages"],
    )
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        query = BrowseInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        try:
            result = browse(
                namespace,
                shard=q.get("shard"),
                offset=q.get("offset"),
                time_ms=q.get("time"),
                key=q.get("key"),
                tag=q.get("tag"),
                positions=q.get("positions"),
                all_shards=q["all_shards"],
                limit=q["limit"],
                fmt=q["display"],
            )
        except OffsetOutOfRangeError as exc:
            return out_of_range(request, exc)
        return Response(BrowseOutputSerializer(with_effective_expiry(namespace, result)).data)

    @extend_schema(
        request=ProduceInputSerializer,
        responses={
            201: ProduceOutputSerializer,
            **problems(
                {
                    413: "the record is larger than the node takes (record_too_large): size, limit",
                    429: "the backlog quota refuses producers (backlog_quota_exceeded, producer_held): kind, limit, "
                    "current",
                    503: "the node hosting the shard could not be reached (node_unavailable)",
                    507: "the node's disk is above its warning watermark (disk_full): used_ratio, warning_ratio",
                },
                NodeRefusalSerializer,
            ),
        },
        tags=["messages"],
    )
    def post(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        data = ProduceInputSerializer(data=request.data, context={"namespace": namespace})
        data.is_valid(raise_exception=True)
        # a node's refusal (413, 429, 507…) is its problem details with the numbers (core.exceptions)
        placed = services.produce(namespace=namespace, actor=request.user, **data.validated_data)
        return Response(ProduceOutputSerializer(placed).data, status=status.HTTP_201_CREATED)
