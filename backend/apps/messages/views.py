from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.messages.selectors import browse
from backend.apps.messages.serializers import BrowseInputSerializer, BrowseOutputSerializer
from backend.apps.namespaces.models import Namespace


class MessageBrowseView(APIView):
    @extend_schema(parameters=[BrowseInputSerializer], responses=BrowseOutputSerializer, tags=["messages"])
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        query = BrowseInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        result = browse(
            namespace,
            shard=q["shard"],
            offset=q.get("offset"),
            time_ms=q.get("time"),
            key=q.get("key"),
            tag=q.get("tag"),
            limit=q["limit"],
            fmt=q["display"],
        )
        return Response(BrowseOutputSerializer(result).data)
