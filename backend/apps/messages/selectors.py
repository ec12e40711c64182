"""The message browser: bounded reads of a shard through its node."""

from __future__ import annotations

from typing import Any

from backend.apps.namespaces.selectors import node_for_shard
from backend.apps.nodes.selectors import client_for
from storage_engine.api import Record
from storage_engine.errors import InvalidArgumentError

MAX_SHOWN_BYTES = 4096
MAX_LIMIT = 200


def show_bytes(data: bytes | None, fmt: str) -> dict[str, Any]:
    """A value for display: text (when it is UTF-8 and text was asked) or hex, cut at 4 KiB."""
    if data is None:
        return {"text": None, "hex": None, "size": 0, "truncated": False, "tombstone": True}
    shown = data[:MAX_SHOWN_BYTES]
    text = None
    if fmt == "text":
        try:
            text = shown.decode()
        except UnicodeDecodeError:
            text = None  # not text: the browser shows the hex instead
    return {
        "text": text,
        "hex": shown.hex() if text is None else None,
        "size": len(data),
        "truncated": len(data) > MAX_SHOWN_BYTES,
        "tombstone": False,
    }


def _row(record: Record, fmt: str) -> dict[str, Any]:
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "expire_at": record.expire_at,
        "key": show_bytes(record.key, "text") if record.key is not None else None,
        "value": show_bytes(record.value, fmt),
        "tags": list(record.tags),
        "headers": {name: show_bytes(value, "text") for name, value in record.headers},
    }


def browse(
    namespace: Any,
    *,
    shard: int,
    offset: int | None = None,
    time_ms: int | None = None,
    key: str | None = None,
    tag: str | None = None,
    limit: int = 50,
    fmt: str = "text",
) -> dict[str, Any]:
    """Records of one shard: from an offset or a time, the latest for a key, or those with a tag."""
    node = node_for_shard(namespace, shard)  # raises for a shard out of range
    if key is not None and any(x is not None for x in (offset, time_ms, tag)):
        raise InvalidArgumentError("key", "cannot be combined with offset, time or tag")
    if time_ms is not None and (offset is not None or tag is not None):
        raise InvalidArgumentError("time", "cannot be combined with offset or tag")
    limit = max(1, min(limit, MAX_LIMIT))
    with client_for(node) as client:
        if key is not None:
            record = client.read_key(namespace.name, shard, key)
            records, next_offset = ([record] if record else []), None
        elif tag is not None:
            result = client.read_tag(namespace.name, shard, tag, offset or 0, limit)
            records, next_offset = list(result.records), result.next_offset
        else:
            start = offset or 0
            if time_ms is not None:
                found = client.offset_for_timestamp(namespace.name, shard, time_ms)
                if found is None:
                    return {"records": [], "next_offset": None}
                start = found
            result = client.read(namespace.name, shard, start, max_records=limit, max_bytes=4 << 20)
            records, next_offset = list(result.records), result.next_offset
    return {"records": [_row(r, fmt) for r in records], "next_offset": next_offset}
