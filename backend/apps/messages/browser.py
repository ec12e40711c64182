"""The message browser: bounded reads of a namespace's shards through the nodes hosting them.

One shard (``shard`` given): from an offset, from a time, the latest record of a
key, or the records with a tag. Without a shard:

- **by key**: placement is by key (``crc32(key) mod shards``, the node's keyed
  produce route and :func:`storage_engine.node_api.placement.shard_for_key`), so the key's
  own shard is asked first; a record produced to a chosen shard can sit
  elsewhere, so the other shards follow until one answers (``all_shards``: every
  shard answers with its latest record of the key);
- **by time**: each shard finds its first offset at or after the time
  (``offset-for-time``), reads up to ``limit`` records from there, and the pages
  are merged by timestamp (then shard, then offset). ``next_positions`` (shard →
  offset) continues every shard where this page stopped; pass it back as
  ``positions``.

Every record answered carries the shard it came from. A read below a shard's
log start (retention or expiry deleted it) or past its end raises
:class:`~storage_engine.errors.OffsetOutOfRangeError` with both bounds; the view
answers it as a 416 the browser can explain and offer to jump from.
"""

from __future__ import annotations

import re
from typing import Any

from backend.apps.namespaces.selectors import node_for_shard, shard_nodes
from backend.apps.nodes.gateway import client_for
from backend.apps.policies.selectors import effective_namespace_policy
from storage_engine.api import Record
from storage_engine.errors import InvalidArgumentError, OffsetOutOfRangeError
from storage_engine.node_api.placement import shard_for_key
from storage_engine.rules.expiry import effective_expiry

MAX_SHOWN_BYTES = 4096
MAX_LIMIT = 200
READ_BYTES = 4 << 20
_POSITIONS = re.compile(r"\d{1,5}:\d{1,19}(,\d{1,5}:\d{1,19})*")


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


def _row(record: Record, shard: int, fmt: str) -> dict[str, Any]:
    return {
        "shard": shard,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "expire_at": record.expire_at,
        "key": show_bytes(record.key, "text") if record.key is not None else None,
        "value": show_bytes(record.value, fmt),
        "tags": list(record.tags),
        "headers": {name: show_bytes(value, "text") for name, value in record.headers},
    }


def parse_positions(text: str, shards: int) -> dict[int, int]:
    """``"0:12,1:40"`` → {0: 12, 1: 40}: where each shard's next page starts."""
    if not _POSITIONS.fullmatch(text):
        raise InvalidArgumentError("positions", "must be shard:offset pairs separated by commas, e.g. 0:12,1:40")
    out: dict[int, int] = {}
    for pair in text.split(","):
        shard_text, offset_text = pair.split(":")
        shard, offset = int(shard_text), int(offset_text)
        if shard >= shards:
            raise InvalidArgumentError("positions", f"shard {shard} is not from 0 to {shards - 1}")
        if offset >= 1 << 63:
            raise InvalidArgumentError("positions", "offsets must be from 0 to 2^63-1")
        out[shard] = offset
    return out


def format_positions(positions: dict[int, int]) -> str:
    return ",".join(f"{shard}:{offset}" for shard, offset in sorted(positions.items()))


def browse(
    namespace: Any,
    *,
    shard: int | None,
    offset: int | None = None,
    time_ms: int | None = None,
    key: str | None = None,
    tag: str | None = None,
    positions: str | None = None,
    all_shards: bool = False,
    limit: int = 50,
    fmt: str = "text",
) -> dict[str, Any]:
    """Records of one shard, or of every shard by key or time (see the module docstring)."""
    if key is not None and any(x is not None for x in (offset, time_ms, tag, positions)):
        raise InvalidArgumentError("key", "cannot be combined with offset, time, tag or positions")
    if time_ms is not None and (offset is not None or tag is not None or positions is not None):
        raise InvalidArgumentError("time", "cannot be combined with offset, tag or positions")
    if positions is not None and (shard is not None or offset is not None or tag is not None):
        raise InvalidArgumentError("positions", "continues a search across shards: no shard, offset or tag")
    if all_shards and (key is None or shard is not None):
        raise InvalidArgumentError("all_shards", "applies to a key lookup without a shard")
    limit = max(1, min(limit, MAX_LIMIT))
    answer: dict[str, Any] = {"next_offset": None, "next_positions": None, "shards": []}
    if shard is None:
        if key is not None:
            return {**answer, **_key_in_any_shard(namespace, key, all_shards, fmt)}
        if time_ms is not None or positions is not None:
            return {**answer, **_merged_by_time(namespace, time_ms, positions, limit, fmt)}
        raise InvalidArgumentError("shard", "is required to read from an offset or by tag")
    node = node_for_shard(namespace, shard)  # raises for a shard out of range
    answer["shards"] = [shard]
    with client_for(node) as client:
        if key is not None:
            record = client.read_key(namespace.name, shard, key)
            return {**answer, "records": [_row(record, shard, fmt)] if record else []}
        if tag is not None:
            result = client.read_tag(namespace.name, shard, tag, offset or 0, limit)
        else:
            start = offset or 0
            if time_ms is not None:
                found = client.offset_for_timestamp(namespace.name, shard, time_ms)
                if found is None:
                    return {**answer, "records": []}
                start = found
            result = client.read(namespace.name, shard, start, max_records=limit, max_bytes=READ_BYTES)
    return {**answer, "records": [_row(r, shard, fmt) for r in result.records], "next_offset": result.next_offset}


def _key_in_any_shard(namespace: Any, key: str, all_shards: bool, fmt: str) -> dict[str, Any]:
    """The key's own shard first (placement by key), then the others until one has it."""
    nodes = shard_nodes(namespace)
    home = shard_for_key(key.encode(), namespace.shards)
    order = [home, *(s for s in range(namespace.shards) if s != home)]
    rows: list[dict[str, Any]] = []
    asked: list[int] = []
    for shard in order:
        with client_for(nodes[shard]) as client:
            record = client.read_key(namespace.name, shard, key)
        asked.append(shard)
        if record is not None:
            rows.append(_row(record, shard, fmt))
            if not all_shards:
                break
    rows.sort(key=lambda r: (-r["timestamp"], r["shard"]))  # the latest first
    return {"records": rows, "shards": asked, "key_shard": home}


def _merged_by_time(namespace: Any, time_ms: int | None, positions: str | None, limit: int, fmt: str) -> dict[str, Any]:
    """Up to ``limit`` records from every shard at or after a time, merged by timestamp."""
    nodes = shard_nodes(namespace)
    starts: dict[int, int] = {}
    if positions is not None:
        starts = parse_positions(positions, namespace.shards)
    pages: dict[int, list[Record]] = {}
    for shard in range(namespace.shards):
        with client_for(nodes[shard]) as client:
            if positions is None:
                found = client.offset_for_timestamp(namespace.name, shard, time_ms)  # type: ignore[arg-type]
                if found is None:
                    continue  # nothing this late in the shard
                starts[shard] = found
            elif shard not in starts:
                continue  # that shard was done
            try:
                result = client.read(namespace.name, shard, starts[shard], max_records=limit, max_bytes=READ_BYTES)
            except OffsetOutOfRangeError as exc:
                if exc.offset >= exc.end_offset:
                    continue
                # Retention moved the log start since the last page: go on from there.
                starts[shard] = exc.log_start_offset
                result = client.read(namespace.name, shard, starts[shard], max_records=limit, max_bytes=READ_BYTES)
        pages[shard] = list(result.records)
    merged = sorted(
        ((r, shard) for shard, records in pages.items() for r in records),
        key=lambda item: (item[0].timestamp, item[1], item[0].offset),
    )[:limit]
    next_positions = dict(starts)
    for record, shard in merged:
        next_positions[shard] = record.offset + 1
    return {
        "records": [_row(r, shard, fmt) for r, shard in merged],
        "shards": sorted(starts),
        "next_positions": format_positions(next_positions) if merged else None,
    }


def with_effective_expiry(namespace: Any, answer: dict[str, Any]) -> dict[str, Any]:
    """Each record of a browse answer with ``effective_expires_at``: when it stops being visible, its own
    TTL or the namespace's, whichever is first (``storage_engine.rules.expiry.effective_expiry``, DESIGN §3)."""
    ttl_ms = effective_namespace_policy(namespace).ttl_ms
    for row in answer.get("records") or ():
        row["effective_expires_at"] = effective_expiry(row["timestamp"], row["expire_at"], ttl_ms)
    return answer
