"""Subscriptions of a namespace (what kafka-ui shows as consumer groups, Pulsar Manager as
subscriptions): list with backlog per shard, create, delete, and move cursors.

Cursor operations (operator role; each one confirmed by repeating the subscription's
name and audited with the cursors before and after), on one shard or on every shard,
each shard on the node hosting it:

- ``earliest``: replay everything still stored (the cursor goes BACKWARD: the node's
  ``seek``, Pulsar's ``resetCursor``; ``acknowledge`` never moves back);
- ``latest``: skip everything stored now (``seek`` to ``end_offset − 1``);
- ``time``: just before the first record at or after ``timestamp`` (``seek``), backward
  or forward;
- ``skip``: acknowledge the next ``count`` messages (forward only);
- ``clear``: acknowledge the whole backlog (forward only; Pulsar's ``clear-backlog``).
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.audit import services as audit
from backend.apps.core.permissions import IsAdmin, IsOperator
from backend.apps.core.schema import problems
from backend.apps.core.serializers import Int64TextField, NodeRefusalSerializer, StrictSerializer
from backend.apps.namespaces import selectors, services
from backend.apps.namespaces.models import Namespace, Subscription
from backend.apps.namespaces.serializers import (
    NamespaceDeleteInputSerializer,
    SubscriptionInputSerializer,
    SubscriptionOutputSerializer,
)
from backend.apps.nodes.gateway import client_for
from storage_engine.errors import StorageError

CURSOR_ACTIONS = ("earliest", "latest", "time", "skip", "clear")
AUDIT_ACTIONS = {
    "earliest": "subscription.reset",
    "latest": "subscription.reset",
    "time": "subscription.reset",
    "skip": "subscription.skip",
    "clear": "subscription.clear_backlog",
}


# -- serializers ----------------------------------------------------------------------------------
class SubscriptionRowSerializer(SubscriptionOutputSerializer):
    age_ms = serializers.IntegerField(
        allow_null=True, help_text="age of the oldest unacknowledged record over the shards (ms)"
    )


class SubscriptionRowsSerializer(serializers.Serializer):
    results = SubscriptionRowSerializer(many=True)
    node_error = serializers.CharField(allow_blank=True)


class CursorInputSerializer(StrictSerializer):
    action = serializers.ChoiceField(
        choices=CURSOR_ACTIONS,
        help_text="earliest (replay all), latest (skip all stored), time (from `timestamp`), "
        "skip (`count` messages), clear (acknowledge the backlog)",
    )
    shard = serializers.IntegerField(
        min_value=0, required=False, allow_null=True, help_text="one shard; default: every shard"
    )
    timestamp = serializers.IntegerField(
        min_value=0, max_value=(1 << 63) - 1, required=False, help_text="epoch ms, for `time`"
    )
    count = Int64TextField(
        min_value=1, max_value=(1 << 62), required=False, help_text="messages to skip per shard, for `skip` (digits)"
    )
    confirm = serializers.CharField(help_text="the subscription's name, repeated")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        action = attrs["action"]
        if action == "time" and attrs.get("timestamp") is None:
            raise serializers.ValidationError({"timestamp": ["is required to reset to a time"]})
        if action != "time" and "timestamp" in attrs:
            raise serializers.ValidationError({"timestamp": [f"applies to action time, not {action}"]})
        if action == "skip" and attrs.get("count") is None:
            raise serializers.ValidationError({"count": ["is required to skip messages"]})
        if action != "skip" and "count" in attrs:
            raise serializers.ValidationError({"count": [f"applies to action skip, not {action}"]})
        shards = self.context["namespace"].shards
        if attrs.get("shard") is not None and attrs["shard"] >= shards:
            raise serializers.ValidationError({"shard": [f"must be from 0 to {shards - 1}"]})
        if attrs["confirm"] != self.context["subscription"].name:
            raise serializers.ValidationError({"confirm": ["must repeat the subscription name exactly"]})
        return attrs


class CursorMoveSerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    before = serializers.IntegerField(help_text="the cursor (mark-delete position) before")
    after = serializers.IntegerField(help_text="the cursor after")


class CursorOutputSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=CURSOR_ACTIONS)
    moves = CursorMoveSerializer(many=True)
    subscription = SubscriptionRowSerializer()


# -- reads and writes -----------------------------------------------------------------------------
def subscription_rows(namespace: Namespace, name: str | None = None) -> tuple[list[dict[str, Any]], str]:
    rows, error = services.subscriptions_with_backlog(namespace)
    return ([r for r in rows if name is None or r["name"] == name]), error


def move_cursor(
    *,
    subscription: Subscription,
    actor: Any,
    action: str,
    shard: int | None = None,
    timestamp: int | None = None,
    count: int | None = None,
) -> list[dict[str, int]]:
    """Move the subscription's cursor on one shard or every shard; answers each shard's move.

    Audited once with every shard's cursor before and after; when a node fails part-way the
    shards already moved stay moved, and the entry says which failed.
    """
    namespace = subscription.namespace
    wanted = set(range(namespace.shards) if shard is None else [shard])
    moves: list[dict[str, int]] = []
    try:
        for node, shards in selectors.hosting_nodes(namespace):
            mine = [s for s in shards if s in wanted]
            if not mine:
                continue
            with client_for(node) as client:
                rows = {r["shard"]: r for r in client.backlog(namespace.name, subscription.name)}
                for s in mine:
                    row = rows[s]
                    before, end = int(row["cursor"]), int(row["end_offset"])
                    after = _move(client, namespace.name, subscription.name, s, action, row, timestamp, count)
                    moves.append({"shard": s, "before": before, "after": after, "end_offset": end})
    except StorageError as exc:
        _audit(subscription, actor, action, moves, timestamp, count, result="failed", detail=str(exc))
        raise
    _audit(subscription, actor, action, moves, timestamp, count)
    return [{k: m[k] for k in ("shard", "before", "after")} for m in moves]


def _move(
    client: Any,
    namespace: str,
    name: str,
    shard: int,
    action: str,
    row: dict[str, Any],
    timestamp: int | None,
    count: int | None,
) -> int:
    cursor, end, backlog = int(row["cursor"]), int(row["end_offset"]), int(row["messages"])
    if action == "earliest":
        return int(client.seek_subscription(namespace, name, shard, -1))
    if action == "latest":
        return int(client.seek_subscription(namespace, name, shard, end - 1))
    if action == "time":
        return int(client.seek_subscription(namespace, name, shard, timestamp=timestamp))
    if backlog == 0:
        return cursor  # nothing to skip or clear
    if action == "skip":
        first_unacked = end - backlog  # after the cursor, never below the log start
        return int(client.acknowledge(namespace, name, shard, min(first_unacked + int(count or 0) - 1, end - 1)))
    return int(client.acknowledge(namespace, name, shard, end - 1))  # clear


def _audit(
    subscription: Subscription,
    actor: Any,
    action: str,
    moves: list[dict[str, int]],
    timestamp: int | None,
    count: int | None,
    *,
    result: str = "ok",
    detail: str = "",
) -> None:
    after: dict[str, Any] = {"action": action, "cursors": {str(m["shard"]): m["after"] for m in moves}}
    if timestamp is not None:
        after["timestamp"] = timestamp
    if count is not None:
        after["count"] = count
    audit.record(
        actor=actor,
        action=AUDIT_ACTIONS[action],
        target_type="subscription",
        target=f"{subscription.namespace.name}/{subscription.name}",
        before={"cursors": {str(m["shard"]): m["before"] for m in moves}},
        after=after,
        result=result,
        detail=detail,
    )


# -- views ----------------------------------------------------------------------------------------
class SubscriptionListCreateView(APIView):
    """A namespace's subscriptions with their live backlog (GET, any role); create one (POST, admin)."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=SubscriptionRowsSerializer, tags=["subscriptions"])
    def get(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        rows, error = subscription_rows(namespace)
        return Response(SubscriptionRowsSerializer({"results": rows, "node_error": error}).data)

    @extend_schema(
        request=SubscriptionInputSerializer,
        responses={
            201: SubscriptionRowSerializer,
            **problems({503: "a node hosting a shard could not be reached: the subscription is not created"}),
        },
        tags=["subscriptions"],
    )
    def post(self, request: Request, name: str) -> Response:
        namespace = get_object_or_404(Namespace.objects.select_related("node"), name=name)
        data = SubscriptionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if namespace.subscriptions.filter(name=data.validated_data["name"]).exists():
            raise serializers.ValidationError({"name": ["a subscription with this name already exists"]})
        sub = services.create_subscription(namespace=namespace, actor=request.user, **data.validated_data)
        body = {"name": sub.name, "initial": sub.initial, "created_at": sub.created_at, "backlog": None}
        return Response(SubscriptionRowSerializer(body).data, status=status.HTTP_201_CREATED)


class SubscriptionDetailView(APIView):
    """Delete a subscription on every node hosting a shard (admin; confirmed by repeating its name; audited)."""

    permission_classes = [IsAdmin]

    @extend_schema(
        summary="Delete a subscription",
        request=NamespaceDeleteInputSerializer,
        responses={204: None, **problems({503: "a node hosting a shard could not be reached"})},
        tags=["subscriptions"],
    )
    def delete(self, request: Request, name: str, subscription: str) -> Response:
        sub = get_object_or_404(
            Subscription.objects.select_related("namespace__node"), namespace__name=name, name=subscription
        )
        confirm = NamespaceDeleteInputSerializer(data=request.data)
        confirm.is_valid(raise_exception=True)
        if confirm.validated_data["confirm"] != sub.name:
            raise serializers.ValidationError({"confirm": ["must repeat the subscription name exactly"]})
        services.delete_subscription(subscription=sub, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionCursorView(APIView):
    """Reset, skip or clear a subscription's cursor (operator; confirmed by name; audited)."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=CursorInputSerializer,
        responses={
            200: CursorOutputSerializer,
            **problems(
                {
                    409: "a message-TTL check is moving this cursor (already_running): try again",
                    503: "a node hosting a shard could not be reached",
                },
                NodeRefusalSerializer,
            ),
        },
        tags=["subscriptions"],
    )
    def post(self, request: Request, name: str, subscription: str) -> Response:
        sub = get_object_or_404(
            Subscription.objects.select_related("namespace__node"), namespace__name=name, name=subscription
        )
        data = CursorInputSerializer(data=request.data, context={"namespace": sub.namespace, "subscription": sub})
        data.is_valid(raise_exception=True)
        q = data.validated_data
        # a node's refusal (409 already_running…) is its problem details (core.exceptions)
        moves = move_cursor(
            subscription=sub,
            actor=request.user,
            action=q["action"],
            shard=q.get("shard"),
            timestamp=q.get("timestamp"),
            count=q.get("count"),
        )
        rows, _error = subscription_rows(sub.namespace, sub.name)
        return Response(CursorOutputSerializer({"action": q["action"], "moves": moves, "subscription": rows[0]}).data)
