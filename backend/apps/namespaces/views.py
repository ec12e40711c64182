from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.permissions import IsAdmin
from backend.apps.core.schema import problems
from backend.apps.namespaces import selectors, services
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.serializers import (
    NamespaceDeleteInputSerializer,
    NamespaceOutputSerializer,
)
from backend.apps.policies import selectors as policy_selectors
from backend.apps.policies.serializers import PolicyChangeInputSerializer, PolicyOutputSerializer


class NamespaceDetailView(APIView):
    """One namespace: read it (any role), or delete it with its data on every node hosting a shard (admin;
    confirmed by repeating its name; audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="Read a namespace", responses=NamespaceOutputSerializer, tags=["namespaces"])
    def get(self, request: Request, name: str) -> Response:
        return Response(NamespaceOutputSerializer(get_object_or_404(selectors.namespace_list(), name=name)).data)

    @extend_schema(
        summary="Delete a namespace and its data",
        description="Deletes the data on every node hosting a shard, then the namespace (admin; `confirm` repeats "
        "its name; audited). A node that fails stops the deletion with the namespace kept: retry to finish it.",
        request=NamespaceDeleteInputSerializer,
        responses={
            204: None,
            **problems({503: "a node hosting a shard could not be reached: nothing was deleted there"}),
        },
        tags=["namespaces"],
    )
    def delete(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        confirm = NamespaceDeleteInputSerializer(data=request.data)
        confirm.is_valid(raise_exception=True)
        if confirm.validated_data["confirm"] != namespace.name:
            raise serializers.ValidationError({"confirm": ["must repeat the namespace name exactly"]})
        services.delete_namespace(namespace=namespace, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NamespacePolicyView(APIView):
    """A namespace's effective policy: value and source of every field; PATCH sets or resets overrides."""

    permission_classes = [IsAdmin]

    def _answer(self, namespace: Namespace) -> Response:
        return Response(
            {
                "fields": policy_selectors.namespace_policy_view(namespace),
                "sync_state": namespace.sync_state,
                "sync_error": namespace.sync_error,
            }
        )

    @extend_schema(responses=PolicyOutputSerializer, tags=["policies"])
    def get(self, request: Request, name: str) -> Response:
        return self._answer(get_object_or_404(Namespace, name=name))

    @extend_schema(request=PolicyChangeInputSerializer, responses=PolicyOutputSerializer, tags=["policies"])
    def patch(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        change = PolicyChangeInputSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        namespace = services.update_namespace_policy(
            actor=request.user,
            namespace=namespace,
            set_=change.validated_data["set"],
            reset=change.validated_data["reset"],
        )
        return self._answer(namespace)


class ClusterPolicyView(APIView):
    """The cluster default policy: every field's effective value and source."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=PolicyOutputSerializer, tags=["policies"])
    def get(self, request: Request) -> Response:
        return Response({"fields": policy_selectors.cluster_policy_view()})

    @extend_schema(request=PolicyChangeInputSerializer, responses=PolicyOutputSerializer, tags=["policies"])
    def patch(self, request: Request) -> Response:
        change = PolicyChangeInputSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        services.update_cluster_policy(
            actor=request.user, set_=change.validated_data["set"], reset=change.validated_data["reset"]
        )
        return Response({"fields": policy_selectors.cluster_policy_view()})
