"""Writes of the audit log: every policy change, destructive action, login failure and refused write."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user

from backend.apps.audit.models import AuditEntry
from backend.apps.core.roles import role_of
from backend.apps.core.throttling import client_ip

log = logging.getLogger(__name__)

_MISSING = object()


def diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Field → {"before", "after"} for every key whose value differs (absent keys show as null)."""
    before, after = before or {}, after or {}
    changed = {}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old != new:
            changed[key] = {"before": None if old is _MISSING else old, "after": None if new is _MISSING else new}
    return changed


def record(
    *,
    actor: Any,
    action: str,
    target_type: str,
    target: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    result: str = "ok",
    detail: str = "",
    remote_addr: str | None = None,
    actor_name: str = "",
) -> AuditEntry:
    """Write one entry; ``actor_name`` names an actor who is not a logged-in user (e.g. a schedule)."""
    user = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=user,
        actor_name=user.get_username() if user else actor_name,
        action=action,
        target_type=target_type,
        target=target,
        before=before,
        after=after,
        diff=diff(before, after),
        result=result,
        detail=detail,
        remote_addr=remote_addr,
    )


def record_login_failure(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any) -> None:
    """Signal receiver for ``user_login_failed``; the password is never stored."""
    username = str(credentials.get("username", ""))[:150]
    record(
        actor=None,
        action="auth.login_failed",
        target_type="user",
        target=username,
        result="failed",
        remote_addr=(client_ip(request) or None) if request is not None else None,
        actor_name=username,
    )


def record_denied_write(sender: Any, exc: Any, request: Any, **_: Any) -> None:
    """A write refused with 403 (a role too low, a CSRF failure) goes to the audit log as ``denied``:
    who, which method and route, when, and why. Reads are not audited."""
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False) and hasattr(request, "_request"):
        user = get_user(request._request)  # refused while authenticating (CSRF): the session's user
    route = getattr(getattr(request, "resolver_match", None), "route", "") or ""
    try:
        record(
            actor=user,
            action="api.denied",
            target_type="route",
            target=f"{request.method} {request.path}"[:300],
            after={"method": request.method, "path": request.path, "route": route, "role": role_of(user)},
            result="denied",
            detail=str(exc.detail)[:2000],
            remote_addr=client_ip(request) or None,
            actor_name=getattr(user, "get_username", lambda: "")() or "anonymous",
        )
    except Exception:  # the 403 stands even if the audit write fails
        log.exception("audit: could not record a denied %s %s", request.method, request.path)
