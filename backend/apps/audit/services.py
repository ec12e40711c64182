"""Writes of the audit log: every policy change, destructive action and login failure."""

from __future__ import annotations

from typing import Any

from backend.apps.audit.models import AuditEntry

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
    from backend.apps.core.throttling import client_ip

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
