"""Roles: viewer (read), operator (manual actions), admin (policies, nodes, users).

A user's role is the highest of the groups named after the roles; superusers
are admins; an authenticated user in no role group is a viewer.
"""

from __future__ import annotations

from typing import Any

ROLES = ("viewer", "operator", "admin")
RANK = {name: i for i, name in enumerate(ROLES)}


def role_of(user: Any) -> str | None:
    if user is None or not user.is_authenticated:
        return None
    if user.is_superuser:
        return "admin"
    names = set(user.groups.values_list("name", flat=True))
    held = [r for r in ROLES if r in names]
    return held[-1] if held else "viewer"


def has_role(user: Any, needed: str) -> bool:
    role = role_of(user)
    return role is not None and RANK[role] >= RANK[needed]
