from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.namespaces import selectors, services
from backend.apps.namespaces.serializers import NamespaceInputSerializer, NamespaceOutputSerializer


class NamespacePagination(CursorPagination):
    ordering = "name"
    page_size = 100
    max_page_size = 500
    page_size_query_param = "page_size"


class NamespaceListCreateView(APIView):
    @extend_schema(responses=NamespaceOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        paginator = NamespacePagination()
        page = paginator.paginate_queryset(selectors.namespace_list(), request, view=self)
        return paginator.get_paginated_response(NamespaceOutputSerializer(page, many=True).data)

    @extend_schema(request=NamespaceInputSerializer, responses={201: NamespaceOutputSerializer})
    def post(self, request: Request) -> Response:
        serializer = NamespaceInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        namespace = services.create_namespace(actor=request.user, **serializer.validated_data)
        return Response(NamespaceOutputSerializer(namespace).data, status=status.HTTP_201_CREATED)
