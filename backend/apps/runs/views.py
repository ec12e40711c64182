from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.pagination import cursor_page
from backend.apps.core.permissions import IsOperator
from backend.apps.runs import selectors, services
from backend.apps.runs.filters import TaskRunFilter
from backend.apps.runs.models import TaskRun
from backend.apps.runs.serializers import TaskRunOutputSerializer


@extend_schema(tags=["runs"])
class TaskRunListView(ListAPIView):
    """Task runs (lifecycle actions, scheduled jobs, Spark jobs), newest first, one cursor page at a time."""

    serializer_class = TaskRunOutputSerializer
    pagination_class = cursor_page(("-created_at", "-id"), page_size=50)
    filterset_class = TaskRunFilter

    def get_queryset(self):
        return selectors.run_list()


@extend_schema(tags=["runs"])
class TaskRunDetailView(RetrieveAPIView):
    """One task run: its state, progress, counts and parameters."""

    serializer_class = TaskRunOutputSerializer

    def get_queryset(self):
        return selectors.run_list()


class TaskRunCancelView(APIView):
    """Ask a run to stop (operator; audited): a running one stops between two steps, a queued one never
    starts; a finished run is refused (400, `state`)."""

    permission_classes = [IsOperator]

    @extend_schema(summary="Cancel a task run", request=None, responses=TaskRunOutputSerializer, tags=["runs"])
    def post(self, request: Request, pk: int) -> Response:
        run = services.request_cancel(run=get_object_or_404(TaskRun, pk=pk), actor=request.user)
        return Response(TaskRunOutputSerializer(run).data)
