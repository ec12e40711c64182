from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsOperator
from backend.apps.namespaces.models import Namespace
from backend.apps.reports import selectors, services
from backend.apps.reports.serializers import (
    LifecycleReportInputSerializer,
    LifecycleReportOutputSerializer,
    LifecycleReportQuerySerializer,
    LifecycleReportResultSerializer,
    LifecycleReportRowOutputSerializer,
    SparkJobInputSerializer,
)
from backend.apps.runs.serializers import TaskRunOutputSerializer
from storage_engine.errors import InvalidArgumentError


class LifecycleReportPostView(APIView):
    """Where `python -m spark_jobs lifecycle-report --post-url` sends its rows (token of an operator)."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=LifecycleReportInputSerializer, responses={200: LifecycleReportResultSerializer}, tags=["reports"]
    )
    def post(self, request: Request) -> Response:
        data = LifecycleReportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = services.store_lifecycle_report(
            actor=request.user,
            generated_at=data.validated_data["generated_at"],
            rows=data.validated_data["rows"],
            remote_addr=request.META.get("REMOTE_ADDR"),
        )
        return Response(LifecycleReportResultSerializer(result).data)


class NamespaceLifecycleReportView(APIView):
    """The namespace's lifecycle report: one row per day, newest first."""

    @extend_schema(
        parameters=[LifecycleReportQuerySerializer],
        responses={200: LifecycleReportRowOutputSerializer(many=True)},
        tags=["reports"],
    )
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace, name=name)
        query = LifecycleReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.lifecycle_report(namespace, query.validated_data["days"])
        return Response(LifecycleReportRowOutputSerializer(rows, many=True).data)


class NamespaceLifecycleReportSummaryView(APIView):
    """The namespace's lifecycle report with its totals over the days shown: the figures the report tab
    renders, computed here once (the list endpoint above stays as it was, rows only)."""

    @extend_schema(
        parameters=[LifecycleReportQuerySerializer],
        responses={200: LifecycleReportOutputSerializer},
        tags=["reports"],
    )
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace, name=name)
        query = LifecycleReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        report = selectors.lifecycle_report_with_totals(namespace, query.validated_data["days"])
        return Response(LifecycleReportOutputSerializer(report).data)


class SparkJobStartView(APIView):
    """Start a Spark job now; answers the task run to poll (GET /api/runs/{id}/) or cancel."""

    permission_classes = [IsOperator]

    @extend_schema(request=SparkJobInputSerializer, responses={202: TaskRunOutputSerializer}, tags=["actions"])
    def post(self, request: Request) -> Response:
        data = SparkJobInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        name = data.validated_data["namespace"]
        namespace = Namespace.objects.select_related("node").filter(name=name).first() if name else None
        if name and namespace is None:
            raise InvalidArgumentError("namespace", f"no namespace is named {name!r}")
        run = services.start_spark_job(
            job=data.validated_data["job"],
            actor=request.user,
            namespace=namespace,
            params=data.validated_data["params"],
        )
        return Response(TaskRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)
