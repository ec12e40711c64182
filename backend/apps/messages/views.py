from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsOperator
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
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError, OffsetOutOfRangeError, StorageError
from storage_engine.wire import error_body, status_for


def out_of_range(exc: OffsetOutOfRangeError) -> Response:
    """416 with both bounds, and words the browser shows as they are."""
    below = exc.offset < exc.log_start_offset
    detail = (
        f"offset {exc.offset} is below the log start {exc.log_start_offset} of shard {exc.shard} "
        "(deleted by retention/expiry)"
        if below
        else f"offset {exc.offset} is past the end of shard {exc.shard} (end offset {exc.end_offset})"
    )
    body = {
        "detail": detail,
        "error": exc.code,
        "shard": exc.shard,
        "offset": exc.offset,
        "log_start_offset": exc.log_start_offset,
        "end_offset": exc.end_offset,
        "below_log_start": below,
    }
    return Response(body, status=status.HTTP_416_REQUESTED_RANGE_NOT_SATISFIABLE)


class MessageBrowseView(APIView):
    """Browse a namespace's records (GET, any role); produce a test message (POST, operator)."""

    permission_classes = [IsOperator]
    parser_classes = [JSONParser]

    @extend_schema(
        parameters=[BrowseInputSerializer],
        responses={
            200: BrowseOutputSerializer,
            416: OpenApiResponse(OutOfRangeSerializer, "below the log start or past the end: both bounds"),
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
            return out_of_range(exc)
        return Response(BrowseOutputSerializer(with_effective_expiry(namespace, result)).data)

    @extend_schema(
        request=ProduceInputSerializer,
        responses={
            201: ProduceOutputSerializer,
            413: OpenApiResponse(NodeRefusalSerializer, "the record is larger than the node takes"),
            429: OpenApiResponse(NodeRefusalSerializer, "the backlog quota refuses producers"),
            507: OpenApiResponse(NodeRefusalSerializer, "the node's disk is above its warning watermark"),
        },
        tags=["messages"],
    )
    def post(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        data = ProduceInputSerializer(data=request.data, context={"namespace": namespace})
        data.is_valid(raise_exception=True)
        try:
            placed = services.produce(namespace=namespace, actor=request.user, **data.validated_data)
        except (InvalidArgumentError, NodeUnavailableError):
            raise  # a field-named 400, a 503: the API's usual answers
        except StorageError as exc:  # the node refused the record: its reason, with the numbers
            return Response({"detail": str(exc), **error_body(exc)}, status=status_for(exc))
        return Response(ProduceOutputSerializer(placed).data, status=status.HTTP_201_CREATED)
