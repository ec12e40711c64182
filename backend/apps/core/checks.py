"""Django system checks of security settings (``manage.py check``, run by migrate and runserver)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from backend.apps.core.outgoing import parse_allow_list
from backend.apps.core.throttling import parse_rate


@register()
def check_security_settings(app_configs: Any = None, **_: Any) -> list[Error]:
    errors = []
    try:
        parse_allow_list(settings.OUTGOING_URL_ALLOW or "*")
    except ValueError as exc:
        errors.append(Error(str(exc), id="core.E001"))
    try:
        parse_rate(settings.LOGIN_THROTTLE_RATE)
    except ValueError as exc:
        errors.append(Error(str(exc), id="core.E002"))
    if settings.TRUSTED_PROXY_COUNT < 0:
        errors.append(Error("TRUSTED_PROXY_COUNT must be 0 or more", id="core.E003"))
    return errors
