"""Typed Python client for a storage node's HTTP API.

Pooled connections (one ``httpx.Client`` per :class:`NodeClient`), a timeout on
every call, and the engine's typed errors raised from HTTP errors. Only
idempotent calls are retried.
"""

from __future__ import annotations

from typing import Any

import httpx

from storage_engine.api import NamespaceInfo
from storage_engine.errors import NodeUnavailableError, StorageError
from storage_engine.policy import NamespacePolicy
from storage_engine.wire import error_from_body, namespace_from_json


class NodeClient:
    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = 5.0, retries: int = 2) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._retries = retries
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, idempotent: bool, **kwargs: Any) -> httpx.Response:
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

    def delete_namespace(self, name: str) -> None:
        self._call("DELETE", f"/v1/namespaces/{name}", idempotent=True)


__all__ = ["NodeClient", "StorageError"]
