"""The metrics and alerts clock: patch :func:`now` in tests, or pass ``now=`` to the services."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()


def to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def now_ms(when: datetime | None = None) -> int:
    return to_ms(when if when is not None else now())
