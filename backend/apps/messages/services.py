"""Writes of the messages app: produce a test message from the console (operator role, audited)."""

from __future__ import annotations

from typing import Any

from backend.apps.audit import services as audit
from backend.apps.namespaces.selectors import hosting_nodes, node_for_shard
from backend.apps.nodes.gateway import client_for
from storage_engine.api import NewRecord
from storage_engine.errors import InvalidArgumentError
from storage_engine.node_api.placement import RoundRobin, shard_for_key

_round_robin = RoundRobin()
_RECORD_FIELD = "records[0]."


def produce(
    *,
    namespace: Any,
    actor: Any,
    value: str | None,
    key: str | None = None,
    tags: list[str] | None = None,
    headers: dict[str, str] | None = None,
    ttl_ms: int | None = None,
    shard: int | None = None,
) -> dict[str, Any]:
    """Append one record and answer where it landed: ``{"shard", "offset", "node"}``.

    Placement follows the producers' rule: a chosen ``shard``, else ``crc32(key) mod
    shards`` for a keyed record, else round-robin. When one node hosts every shard the
    node's own keyed produce route places it (the same rule); otherwise the control
    plane picks the shard and sends the record to the node hosting it, since a node
    does not know which of the namespace's shards live elsewhere. ``ttl_ms`` goes to the node as
    it is: the node makes it ``expire_at`` on its own clock (one conversion, in
    :func:`storage_engine.node_api.wire.new_record_from_json`), never this process's clock.
    """
    record = NewRecord(
        value=None if value is None else value.encode(),
        key=None if key is None else key.encode(),
        tags=tuple(tags or ()),
        headers=tuple((name, text.encode()) for name, text in (headers or {}).items()),
    )
    placed = hosting_nodes(namespace)
    try:
        if shard is None and len(placed) == 1:
            node = placed[0][0]
            with client_for(node) as client:
                [(shard, offset)] = client.produce(namespace.name, [record], ttl_ms=ttl_ms)
        else:
            if shard is None:
                shard = (
                    shard_for_key(record.key, namespace.shards)
                    if record.key is not None
                    else _round_robin.next_shard(namespace.shards)
                )
            node = node_for_shard(namespace, shard)
            with client_for(node) as client:
                offset = client.append(namespace.name, shard, [record], ttl_ms=ttl_ms).base_offset
    except InvalidArgumentError as exc:  # the node names the record's field: records[0].key → key
        raise InvalidArgumentError(exc.field.removeprefix(_RECORD_FIELD), exc.rule) from None
    audit.record(
        actor=actor,
        action="message.produce",
        target_type="namespace",
        target=namespace.name,
        after={
            "shard": shard,
            "offset": offset,
            "key": key,
            "tags": list(record.tags),
            "headers": sorted(headers or {}),
            "ttl_ms": ttl_ms,
            "value_bytes": None if record.value is None else len(record.value),
        },
    )
    return {"shard": shard, "offset": offset, "node": node.name}
