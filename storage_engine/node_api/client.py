"""Typed Python client for a storage node's HTTP API.

Pooled connections (one ``httpx.Client`` per :class:`NodeClient`), a timeout on
every call, and the engine's typed errors raised from HTTP errors. Only
idempotent calls are retried.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from storage_engine.api import (
    AppendResult,
    CompactionEstimate,
    DiskStatus,
    LifecycleResult,
    NamespaceInfo,
    NewRecord,
    ReadResult,
    Record,
    SegmentInfo,
)
from storage_engine.errors import InvalidArgumentError, NodeUnavailableError, StorageError
from storage_engine.formats.framing import MEDIA_TYPE, decode_fetch, encode_produce
from storage_engine.formats.segment_files import SegmentFileInfo, SegmentFilePage
from storage_engine.node_api.protocol import StepRequest, operation_of, result_from
from storage_engine.node_api.wire import (
    error_from_body,
    namespace_from_json,
    new_record_to_json,
    read_result_from_json,
    record_from_json,
    segment_from_json,
)
from storage_engine.policies.policy import NamespacePolicy


@dataclass(frozen=True)
class NodePolicyState:
    """A node's answer about its node policy: the fields it enforces and their version."""

    policy: dict[str, Any]
    version: int

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> NodePolicyState:
        return cls(policy=dict(body["policy"]), version=int(body["version"]))


class NodeClient:
    def __init__(
        self, base_url: str, token: str | None = None, timeout_s: float = 5.0, retries: int = 2, binary: bool = False
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.binary = binary
        self._retries = retries
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, idempotent: bool, **kwargs: Any) -> httpx.Response:
        """One request; transport failures are retried only for idempotent calls."""
        attempts = 1 + (self._retries if idempotent else 0)
        last: Exception | None = None
        for _ in range(attempts):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                last = exc
                continue
            if response.status_code >= 400:
                try:
                    body = response.json()
                except ValueError:
                    body = {"message": response.text[:500]}
                raise error_from_body(response.status_code, body if isinstance(body, dict) else {})
            return response
        raise NodeUnavailableError(self.base_url, str(last))

    # -- node ---------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/health", idempotent=True).json()
        return result

    # -- namespaces -----------------------------------------------------------------
    def create_namespace(self, name: str, shards: int, policy: NamespacePolicy | None = None) -> NamespaceInfo:
        body: dict[str, Any] = {"name": name, "shards": shards}
        if policy is not None:
            body["policy"] = policy.to_dict()
        return namespace_from_json(self._call("POST", "/v1/namespaces", idempotent=False, json=body).json())

    def list_namespaces(self) -> list[NamespaceInfo]:
        body = self._call("GET", "/v1/namespaces", idempotent=True).json()
        return [namespace_from_json(n) for n in body["namespaces"]]

    def get_namespace(self, name: str) -> NamespaceInfo:
        return namespace_from_json(self._call("GET", f"/v1/namespaces/{name}", idempotent=True).json())

    def update_namespace(self, name: str, policy: NamespacePolicy) -> NamespaceInfo:
        body = {"policy": policy.to_dict()}
        return namespace_from_json(self._call("PUT", f"/v1/namespaces/{name}", idempotent=True, json=body).json())

    def upsert_namespace(self, name: str, shards: int, policy: NamespacePolicy) -> NamespaceInfo:
        """Create the namespace with ``shards`` or, when it exists (with that shard count), set its policy:
        one idempotent call for a control plane pushing its desired state (``PUT`` with ``shards``)."""
        body = {"shards": shards, "policy": policy.to_dict()}
        return namespace_from_json(self._call("PUT", f"/v1/namespaces/{name}", idempotent=True, json=body).json())

    def delete_namespace(self, name: str) -> None:
        self._call("DELETE", f"/v1/namespaces/{name}", idempotent=True)

    # -- data -----------------------------------------------------------------------
    def _records_payload(
        self, records: Sequence[NewRecord], idempotency_key: str | None, ttl_ms: int | None
    ) -> dict[str, Any]:
        """Request arguments for a produce: the body (binary framing or JSON) and its headers. A
        ``ttl_ms`` travels as it is, in JSON (the binary batch has no field for it): the node turns
        it into ``expire_at`` on its own clock (:func:`storage_engine.node_api.wire.new_record_from_json`)."""
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        if self.binary and ttl_ms is None:
            headers["Content-Type"] = MEDIA_TYPE
            return {"content": encode_produce(records), "headers": headers}
        return {"json": {"records": [new_record_to_json(r, ttl_ms) for r in records]}, "headers": headers}

    def append(
        self,
        namespace: str,
        shard: int,
        records: Sequence[NewRecord],
        idempotency_key: str | None = None,
        *,
        ttl_ms: int | None = None,
    ) -> AppendResult:
        """Append a batch to one shard. Retried on connection errors under an idempotency key
        (generated when not given), so a retry never writes twice. ``ttl_ms``: every record expires
        this long after the node receives the batch, by the node's clock (records then carry no
        ``expire_at``)."""
        path = f"/v1/namespaces/{namespace}/shards/{shard}/records"
        payload = self._records_payload(records, idempotency_key, ttl_ms)
        answer = self._call("POST", path, idempotent=True, **payload).json()
        return AppendResult(answer["base_offset"], answer["count"])

    def produce(
        self,
        namespace: str,
        records: Sequence[NewRecord],
        idempotency_key: str | None = None,
        *,
        ttl_ms: int | None = None,
    ) -> list[tuple[int, int]]:
        """Append records placed by key hash (keyless ones round-robin); returns (shard, offset) per
        record. ``ttl_ms`` as for :meth:`append`."""
        path = f"/v1/namespaces/{namespace}/records"
        payload = self._records_payload(records, idempotency_key, ttl_ms)
        answer = self._call("POST", path, idempotent=True, **payload).json()
        return [(p["shard"], p["offset"]) for p in answer["records"]]

    def read(
        self, namespace: str, shard: int, offset: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        params = {"offset": offset, "max_records": max_records, "max_bytes": max_bytes}
        path = f"/v1/namespaces/{namespace}/shards/{shard}/records"
        if self.binary:
            response = self._call("GET", path, idempotent=True, params=params, headers={"Accept": MEDIA_TYPE})
            return decode_fetch(response.content, response.headers)
        return read_result_from_json(self._call("GET", path, idempotent=True, params=params).json())

    def read_key(self, namespace: str, shard: int, key: str) -> Record | None:
        body = self._call(
            "GET", f"/v1/namespaces/{namespace}/shards/{shard}/key", idempotent=True, params={"key": key}
        ).json()
        return record_from_json(body["record"]) if body["record"] else None

    def read_tag(self, namespace: str, shard: int, tag: str, offset: int = 0, max_records: int = 500) -> ReadResult:
        body = self._call(
            "GET",
            f"/v1/namespaces/{namespace}/shards/{shard}/tags/{tag}",
            idempotent=True,
            params={"offset": offset, "max_records": max_records},
        ).json()
        return read_result_from_json(body)

    def offset_for_timestamp(self, namespace: str, shard: int, timestamp: int) -> int | None:
        body = self._call(
            "GET",
            f"/v1/namespaces/{namespace}/shards/{shard}/offset-for-time",
            idempotent=True,
            params={"timestamp": timestamp},
        ).json()
        offset: int | None = body["offset"]
        return offset

    def list_segments(self, namespace: str, shard: int, page_size: int = 500) -> list[SegmentInfo]:
        """Every segment of a shard, following the node's cursor pages."""
        found: list[SegmentInfo] = []
        after = -1
        while True:
            body = self._call(
                "GET",
                f"/v1/namespaces/{namespace}/shards/{shard}/segments",
                idempotent=True,
                params={"after": after, "limit": page_size},
            ).json()
            found += [segment_from_json(s) for s in body["segments"]]
            if body["next_after"] is None:
                return found
            after = body["next_after"]

    def shard_stats(self, namespace: str, shard: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/v1/namespaces/{namespace}/shards/{shard}/stats", idempotent=True
        ).json()
        return result

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/stats", idempotent=True).json()
        return result

    def metrics_text(self) -> str:
        return self._call("GET", "/metrics", idempotent=True).text

    # -- lifecycle ----------------------------------------------------------------------
    def lifecycle_step(
        self,
        namespace: str | None,
        operation: str,
        shard: int | None = None,
        limit: int | None = None,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """One bounded lifecycle step (see :mod:`storage_engine.node_api.protocol`): ``namespace`` ``None``
        for a node-wide one. The request is checked before it is sent."""
        request = StepRequest(operation_of(operation), namespace, shard, limit, manual, dry_run)
        result = self.step(request)
        if not isinstance(result, LifecycleResult):
            raise InvalidArgumentError("operation", f"{operation} answers a disk status: use check_disk")
        return result

    def step(self, request: StepRequest) -> LifecycleResult | DiskStatus:
        """One step as the engine's own result dataclass.

        Not retried: a step may have done work before a connection failed, and the
        caller (a Celery task) decides; every step is safe to run again. A dry run
        changes nothing, so it is retried like a read.
        """
        response = self._call("POST", request.path, idempotent=request.dry_run, params=request.params())
        return result_from(request.operation, response.json())

    def next_due(self) -> dict[str, Any]:
        """``GET /v1/node/next-due``: ``{"now", "due": {kind: ms or None}, ...}`` (see ``StorageAdapter.next_due``)."""
        result: dict[str, Any] = self._call("GET", "/v1/node/next-due", idempotent=True).json()
        return result

    def sweep_due(self, operation: str, limit: int | None = None) -> LifecycleResult:
        """``POST /v1/node/due/{operation}``: one step of a sweep of the shards due now (not retried)."""
        params = {} if limit is None else {"limit": limit}
        response = self._call("POST", f"/v1/node/due/{operation}", idempotent=False, params=params)
        return LifecycleResult(**response.json())

    def verify(self, namespace: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/v1/namespaces/{namespace}/verify", idempotent=True).json()
        return result

    def check_disk(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/v1/node/disk", idempotent=True).json()
        return result

    def node_policy_state(self) -> NodePolicyState:
        """The node policy in effect with its version (0: never set on this data directory)."""
        return NodePolicyState.from_json(self._call("GET", "/v1/node/policy", idempotent=True).json())

    def put_node_policy(self, policy: dict[str, Any], *, if_version: int | None = None) -> NodePolicyState:
        """Replace the node policy (every field; absent = built-in default) and answer what the
        node now enforces. With ``if_version`` only if that is still the node's version, else
        ``RemoteError`` with status 412 (``precondition_failed``). Retried safely: the same
        values again leave the version as it is."""
        headers = {"If-Match": f'"{if_version}"'} if if_version is not None else {}
        response = self._call("PUT", "/v1/node/policy", idempotent=True, json={"policy": policy}, headers=headers)
        return NodePolicyState.from_json(response.json())

    def node_policy(self) -> dict[str, Any]:
        """The node policy's fields (see :meth:`node_policy_state` for its version)."""
        return self.node_policy_state().policy

    def set_node_policy(self, policy: dict[str, Any]) -> dict[str, Any]:
        """Replace the node policy; answers its fields (see :meth:`put_node_policy`)."""
        return self.put_node_policy(policy).policy

    # -- compaction -------------------------------------------------------------------
    def compaction_estimate(self, namespace: str, shard: int | None = None) -> CompactionEstimate:
        params = {} if shard is None else {"shard": shard}
        answer = self._call("GET", f"/v1/namespaces/{namespace}/compaction-estimate", idempotent=True, params=params)
        return CompactionEstimate(**answer.json())

    def compact_with_plan(self, namespace: str, shard: int, keep: dict[int, list[int]]) -> dict[str, Any]:
        body = {"shard": shard, "keep": {str(base): offsets for base, offsets in keep.items()}}
        result: dict[str, Any] = self._call(
            "POST", f"/v1/namespaces/{namespace}/compaction-plan", idempotent=True, json=body
        ).json()
        return result

    def ttl_index_info(self, namespace: str) -> dict[str, Any]:
        """The namespace id, shard count and end offsets a TTL-index SST writer needs."""
        result: dict[str, Any] = self._call("GET", f"/v1/namespaces/{namespace}/ttl-index", idempotent=True).json()
        return result

    def upload_ttl_index(self, namespace: str, path: str | Path) -> dict[str, Any]:
        """Send the local TTL-index SST file at ``path`` to the node, which bulk-loads it
        (``PUT /v1/namespaces/{ns}/ttl-index``). The file is streamed, not read into memory;
        not retried (the stream cannot be replayed), though loading a file twice is harmless."""
        with open(path, "rb") as body:
            result: dict[str, Any] = self._call(
                "PUT",
                f"/v1/namespaces/{namespace}/ttl-index",
                idempotent=False,
                content=body,
                headers={"Content-Type": "application/octet-stream"},
            ).json()
        return result

    def ingest_ttl_index(self, namespace: str, file: str) -> dict[str, Any]:
        """Ask the node to bulk-load ``file``, the bare name of an SST file already placed in its
        import directory (``<data_dir>/import/``; for a caller sharing the node's data directory).
        Idempotent: loading the same file twice puts the same keys twice."""
        result: dict[str, Any] = self._call(
            "POST", f"/v1/namespaces/{namespace}/ttl-index/ingest", idempotent=True, json={"file": file}
        ).json()
        return result

    # -- subscriptions ----------------------------------------------------------------
    def create_subscription(self, namespace: str, name: str, initial: str = "earliest") -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST",
            f"/v1/namespaces/{namespace}/subscriptions",
            idempotent=False,
            json={"name": name, "initial": initial},
        ).json()
        return result

    def delete_subscription(self, namespace: str, name: str) -> None:
        self._call("DELETE", f"/v1/namespaces/{namespace}/subscriptions/{name}", idempotent=True)

    def list_subscriptions(self, namespace: str) -> list[dict[str, Any]]:
        body = self._call("GET", f"/v1/namespaces/{namespace}/subscriptions", idempotent=True).json()
        return list(body["subscriptions"])

    def read_subscription(
        self, namespace: str, name: str, shard: int, max_records: int = 500, max_bytes: int = 1 << 20
    ) -> ReadResult:
        path = f"/v1/namespaces/{namespace}/subscriptions/{name}/shards/{shard}/records"
        params = {"max_records": max_records, "max_bytes": max_bytes}
        return read_result_from_json(self._call("GET", path, idempotent=True, params=params).json())

    def acknowledge(self, namespace: str, name: str, shard: int, offset: int) -> int:
        path = f"/v1/namespaces/{namespace}/subscriptions/{name}/shards/{shard}/ack"
        return int(self._call("POST", path, idempotent=True, json={"offset": offset}).json()["cursor"])

    def seek_subscription(
        self, namespace: str, name: str, shard: int, position: int | None = None, *, timestamp: int | None = None
    ) -> int:
        """Reset a cursor to ``position`` (the new mark-delete position) or to just before the
        first record at or after ``timestamp``; unlike :meth:`acknowledge` it may move backward.
        Retried safely: the same seek again lands on the same position."""
        path = f"/v1/namespaces/{namespace}/subscriptions/{name}/shards/{shard}/seek"
        body = {"position": position} if timestamp is None else {"timestamp": timestamp}
        return int(self._call("POST", path, idempotent=True, json=body).json()["cursor"])

    def backlog(self, namespace: str, subscription: str | None = None) -> list[dict[str, Any]]:
        params = {} if subscription is None else {"subscription": subscription}
        body = self._call("GET", f"/v1/namespaces/{namespace}/backlog", idempotent=True, params=params).json()
        return list(body["backlog"])

    def segment_files(
        self, namespace: str, shard: int, *, state: str = "sealed", dead: bool = True, page_size: int = 100
    ) -> list[SegmentFileInfo]:
        """A shard's segment files for a reader of the node's data directory (``GET
        .../segment-files``): sealed ones (``state="all"``: the active one too, with its
        committed size), each with its file relative to the data directory, the bytes to read
        and, with ``dead``, the offsets marked dead still in it; every page followed."""
        found: list[SegmentFileInfo] = []
        after = -1
        while True:
            params = {"state": state, "dead": "true" if dead else "false", "after": after, "limit": page_size}
            path = f"/v1/namespaces/{namespace}/shards/{shard}/segment-files"
            page = SegmentFilePage.from_dict(self._call("GET", path, idempotent=True, params=params).json())
            found += page.segments
            if page.next_after is None:
                return found
            after = page.next_after


__all__ = ["NodeClient", "StorageError"]
