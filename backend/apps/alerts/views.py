from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.alerts import delivery, selectors, services
from backend.apps.alerts.filters import AlertFilter
from backend.apps.alerts.serializers import (
    AlertDetailOutputSerializer,
    AlertOutputSerializer,
    AlertRuleInputSerializer,
    AlertRuleOutputSerializer,
    AlertStatusOutputSerializer,
    ChannelInputSerializer,
    ChannelOutputSerializer,
    ChannelTestInputSerializer,
    ChannelTestOutputSerializer,
    RuleEnabledInputSerializer,
    SilenceInputSerializer,
)
from backend.apps.core.pagination import cursor_page
from backend.apps.core.permissions import IsAdmin, IsOperator
from backend.apps.core.roles import has_role


def _channel_context(request: Request) -> dict[str, Any]:
    """Channel targets (webhook URLs often carry a token) are shown in full to admins only."""
    return {"full_target": has_role(request.user, "admin")}


@extend_schema(tags=["alerts"])
class AlertListView(ListAPIView):
    """Alerts, newest first; filter by ``state`` (pending, firing, resolved), ``severity``, ``rule``."""

    serializer_class = AlertOutputSerializer
    pagination_class = cursor_page(("-started_at", "-id"), page_size=50)
    filterset_class = AlertFilter

    def get_queryset(self):
        return selectors.alert_list()


class AlertStatusView(APIView):
    """Whether any alert fires (the Overview's overall status is not "ok" while one does), with counts."""

    @extend_schema(responses=AlertStatusOutputSerializer, tags=["alerts"])
    def get(self, request: Request) -> Response:
        return Response(AlertStatusOutputSerializer(selectors.alert_status()).data)


@extend_schema(tags=["alerts"])
class AlertDetailView(RetrieveAPIView):
    """One alert with its history (every transition and action) and its notification deliveries."""

    serializer_class = AlertDetailOutputSerializer

    def get_queryset(self):
        return selectors.alert_detail()


class AlertAckView(APIView):
    """Acknowledge a pending or firing alert (operator; audited): it stays open but is marked as seen."""

    permission_classes = [IsOperator]

    @extend_schema(summary="Acknowledge an alert", request=None, responses=AlertOutputSerializer, tags=["alerts"])
    def post(self, request: Request, pk: int) -> Response:
        alert = services.acknowledge(alert=get_object_or_404(selectors.alert_list(), pk=pk), actor=request.user)
        return Response(AlertOutputSerializer(alert).data)


class AlertSilenceView(APIView):
    """Silence a pending or firing alert for some minutes (operator; audited): no notifications meanwhile."""

    permission_classes = [IsOperator]

    @extend_schema(
        summary="Silence an alert", request=SilenceInputSerializer, responses=AlertOutputSerializer, tags=["alerts"]
    )
    def post(self, request: Request, pk: int) -> Response:
        alert = get_object_or_404(selectors.alert_list(), pk=pk)
        data = SilenceInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        alert = services.silence(alert=alert, actor=request.user, minutes=data.validated_data["minutes"])
        return Response(AlertOutputSerializer(alert).data)


class AlertRuleListCreateView(APIView):
    """Alert rules: viewers read, admins write (audited); operators turn rules off and on (``…/enabled``)."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=AlertRuleOutputSerializer(many=True), tags=["alerts"])
    def get(self, request: Request) -> Response:
        return Response(AlertRuleOutputSerializer(selectors.rule_list(), many=True).data)

    @extend_schema(request=AlertRuleInputSerializer, responses={201: AlertRuleOutputSerializer}, tags=["alerts"])
    def post(self, request: Request) -> Response:
        data = AlertRuleInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rule = services.create_rule(actor=request.user, **data.validated_data)
        return Response(AlertRuleOutputSerializer(rule).data, status=status.HTTP_201_CREATED)


class AlertRuleDetailView(APIView):
    """One alert rule: viewers read it, admins change or delete it (audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="Read an alert rule", responses=AlertRuleOutputSerializer, tags=["alerts"])
    def get(self, request: Request, pk: int) -> Response:
        return Response(AlertRuleOutputSerializer(get_object_or_404(selectors.rule_list(), pk=pk)).data)

    @extend_schema(
        summary="Change an alert rule",
        description="Only the fields given change (admin; audited).",
        request=AlertRuleInputSerializer,
        responses=AlertRuleOutputSerializer,
        tags=["alerts"],
    )
    def patch(self, request: Request, pk: int) -> Response:
        rule = get_object_or_404(selectors.rule_list(), pk=pk)
        data = AlertRuleInputSerializer(rule, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        rule = services.update_rule(actor=request.user, rule=rule, **data.validated_data)
        return Response(AlertRuleOutputSerializer(selectors.rule_list().get(pk=rule.pk)).data)

    @extend_schema(
        summary="Delete an alert rule", description="Admins only; audited.", responses={204: None}, tags=["alerts"]
    )
    def delete(self, request: Request, pk: int) -> Response:
        services.delete_rule(actor=request.user, rule=get_object_or_404(selectors.rule_list(), pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AlertRuleEnabledView(APIView):
    """Turn a rule (a built-in one too) off or on: operators, audited. Off closes its open alerts."""

    permission_classes = [IsOperator]

    @extend_schema(request=RuleEnabledInputSerializer, responses=AlertRuleOutputSerializer, tags=["alerts"])
    def post(self, request: Request, pk: int) -> Response:
        rule = get_object_or_404(selectors.rule_list(), pk=pk)
        data = RuleEnabledInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rule = services.set_rule_enabled(actor=request.user, rule=rule, enabled=data.validated_data["enabled"])
        return Response(AlertRuleOutputSerializer(selectors.rule_list().get(pk=rule.pk)).data)


class ChannelListCreateView(APIView):
    """Notification channels: viewers read (targets redacted unless admin), admins write (audited); the
    webhook secret is write-only."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=ChannelOutputSerializer(many=True), tags=["alerts"])
    def get(self, request: Request) -> Response:
        channels = selectors.channel_list()
        return Response(ChannelOutputSerializer(channels, many=True, context=_channel_context(request)).data)

    @extend_schema(request=ChannelInputSerializer, responses={201: ChannelOutputSerializer}, tags=["alerts"])
    def post(self, request: Request) -> Response:
        data = ChannelInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        channel = services.create_channel(actor=request.user, **data.validated_data)
        body = ChannelOutputSerializer(channel, context=_channel_context(request)).data
        return Response(body, status=status.HTTP_201_CREATED)


class ChannelDetailView(APIView):
    """One notification channel: viewers read it (the target redacted unless admin), admins change or delete
    it (audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(summary="Read a notification channel", responses=ChannelOutputSerializer, tags=["alerts"])
    def get(self, request: Request, pk: int) -> Response:
        channel = get_object_or_404(selectors.channel_list(), pk=pk)
        return Response(ChannelOutputSerializer(channel, context=_channel_context(request)).data)

    @extend_schema(
        summary="Change a notification channel",
        description="Only the fields given change; a secret not given is kept (admin; audited).",
        request=ChannelInputSerializer,
        responses=ChannelOutputSerializer,
        tags=["alerts"],
    )
    def patch(self, request: Request, pk: int) -> Response:
        channel = get_object_or_404(selectors.channel_list(), pk=pk)
        data = ChannelInputSerializer(channel, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        channel = services.update_channel(actor=request.user, channel=channel, **data.validated_data)
        return Response(ChannelOutputSerializer(channel, context=_channel_context(request)).data)

    @extend_schema(
        summary="Delete a notification channel",
        description="Admins only; audited.",
        responses={204: None},
        tags=["alerts"],
    )
    def delete(self, request: Request, pk: int) -> Response:
        services.delete_channel(actor=request.user, channel=get_object_or_404(selectors.channel_list(), pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTestView(APIView):
    """Send a test message through the channel now (operators, audited): 200 with whether it was delivered
    and, if not, why in our words (never the receiver's answer). OUTGOING_URL_ALLOW applies as to alerts."""

    permission_classes = [IsOperator]

    @extend_schema(request=None, responses=ChannelTestOutputSerializer, tags=["alerts"])
    def post(self, request: Request, pk: int) -> Response:
        channel = get_object_or_404(selectors.channel_list(), pk=pk)
        data = ChannelTestInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(
            ChannelTestOutputSerializer(delivery.send_channel_test(channel=channel, actor=request.user)).data
        )
