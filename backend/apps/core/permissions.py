"""DRF permissions by role. Reads need ``viewer``; writes need the role the class names."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from backend.apps.core.roles import has_role


class _RolePermission(BasePermission):
    write_role = "admin"

    def has_permission(self, request: Any, view: Any) -> bool:
        needed = "viewer" if request.method in SAFE_METHODS else self.write_role
        return has_role(request.user, needed)


class IsViewer(_RolePermission):
    """Default: any role may read; only admins may write."""

    write_role = "admin"


class IsOperator(_RolePermission):
    """Operators (and admins) may run manual actions."""

    write_role = "operator"


class IsAdmin(_RolePermission):
    write_role = "admin"
