"""One error shape for every HTTP answer that is an error: RFC 9457 problem details.

An error body is ``application/problem+json``::

    {"type": "tag:lifecycle-store,2025:problem/disk_full", "title": "Disk full",
     "status": 507, "detail": "disk full: 96.0% used is above …", "code": "disk_full",
     "instance": "/v1/namespaces/orders/records", "used_ratio": 0.96, "warning_ratio": 0.9}

- ``type`` identifies the kind of problem; it is built from the stable ``code`` (the
  engine error's code, e.g. ``invalid_argument``) so a client may switch on either.
  The types are ``tag:`` URIs (RFC 4151): identifiers, never fetched.
- ``title`` is the same for every occurrence of a type; ``detail`` explains this one.
- ``status`` repeats the HTTP status; ``instance`` is the request path when known.
- Further members are extensions carrying the numbers: ``field`` and ``rule`` for bad
  input, ``errors`` for a refused policy, bounds, limits…

Defined here, outside the node, with no web framework import, so that the node and the
control plane's REST API build the very same shape (the node through
:func:`storage_engine.node_api.wire.problem_for`, the REST API through ``backend.apps.core.problems``).
The codes are shared: the engine's (``invalid_argument``, ``not_found``, ``disk_full``…) mean
the same on both, and the REST API adds its own (``validation_error`` with ``errors``:
field → [messages], ``not_authenticated``, ``permission_denied``, ``csrf_failed``,
``throttled`` with ``retry_after``…).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "tag:lifecycle-store,2025:problem/"
# Members defined by RFC 9457 (and ``code``): an extension may not replace them.
RESERVED = frozenset({"type", "title", "status", "detail", "instance", "code"})

# A code's title: one short, unchanging sentence per kind of problem.
TITLES: dict[str, str] = {
    "invalid_argument": "Invalid argument",
    "invalid_record": "Invalid record",
    "invalid_policy": "Invalid policy",
    "unauthorized": "Missing or wrong token",
    "forbidden": "Not allowed with this token",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "unknown_namespace": "Unknown namespace",
    "unknown_shard": "Unknown shard",
    "unknown_subscription": "Unknown subscription",
    "namespace_exists": "Namespace exists",
    "subscription_exists": "Subscription exists",
    "already_running": "Already running",
    "precondition_failed": "Precondition failed",
    "record_too_large": "Record too large",
    "offset_out_of_range": "Offset out of range",
    "backlog_quota_exceeded": "Backlog quota exceeded",
    "producer_held": "Producer held too long",
    "disk_full": "Disk full",
    "engine_closed": "Engine closed",
    "not_ready": "Not ready",
    "corrupt_segment": "Corrupt segment",
    "tier_unavailable": "Object store unavailable",
    "tier_object_missing": "Object missing from the object store",
    "tier_verify_failed": "Object store verification failed",
    "tier_manifest_invalid": "Invalid manifest in the object store",
    "recall_disk_limit": "Not enough disk to recall",
    "internal_error": "Internal error",
    # engine errors the control plane meets calling nodes
    "node_unavailable": "Storage node unavailable",
    "remote_error": "Storage node error",
    # the control plane's REST API (backend.apps.core.problems)
    "validation_error": "Invalid input",
    "parse_error": "Malformed request body",
    "bad_request": "Bad request",
    "invalid_credentials": "Wrong username or password",
    "not_authenticated": "Not authenticated",
    "authentication_failed": "Authentication failed",
    "permission_denied": "Permission denied",
    "csrf_failed": "CSRF check failed",
    "not_acceptable": "Not acceptable",
    "unsupported_media_type": "Unsupported media type",
    "throttled": "Too many requests",
}


def problem_type(code: str) -> str:
    """The ``type`` URI of a code."""
    return TYPE_PREFIX + code


def code_of_type(type_uri: str) -> str | None:
    """The code a ``type`` URI was built from (``None`` for a type not built here)."""
    return type_uri.removeprefix(TYPE_PREFIX) if type_uri.startswith(TYPE_PREFIX) else None


def problem(status: int, code: str, detail: str, *, instance: str | None = None, **extensions: Any) -> dict[str, Any]:
    """A problem details object. ``extensions`` (JSON values) are added as they are; one named like a
    reserved member is refused, since a client could no longer trust the standard members."""
    clash = RESERVED.intersection(extensions)
    if clash:
        raise ValueError(f"extension members may not be named {', '.join(sorted(clash))}")
    try:
        fallback = HTTPStatus(status).phrase
    except ValueError:
        fallback = "Error"
    body: dict[str, Any] = {
        "type": problem_type(code),
        "title": TITLES.get(code, fallback),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance is not None:
        body["instance"] = instance
    body.update(extensions)
    return body
