"""The numeric bounds every boundary shares, and the one wording of a number's rule (a leaf
module: the policy and the validation modules both use it, and neither may import the other's
dependencies).

Offsets, timestamps, expire_at and policy durations travel as signed 64-bit integers in
the segment format, the index keys and the node's JSON: a larger number would fail deep
in ``struct`` (or in ``int.__str__``, which refuses past 4,300 digits) instead of at the
boundary with a message naming the field.

A rule states its numbers in full (``9223372036854775807``, not ``2^63-1``: an operator types
decimals) and its unit, which :func:`unit_of` reads from the field's name — every field is named
after its unit (``*_ms``, ``*_bytes``, ``*_ratio``) — so no message spells a unit by hand.
"""

from __future__ import annotations

import math
from typing import TypeGuard

MAX_INT64 = (1 << 63) - 1
MIN_INT64 = -(1 << 63)
# The longest per-record TTL: far beyond any deadline, and ``now + ttl`` stays within 64 bits
# for any clock before the year 140,000.
MAX_TTL_MS = (1 << 62) // 1000

# Field name → unit: exact names first, then endings (the longest ending that matches wins).
_UNIT_BY_NAME = {"timestamp": "ms since the epoch", "expire_at": "ms since the epoch", "time": "ms since the epoch"}
_UNIT_BY_ENDING = (
    ("_bytes_per_s", "bytes per second"),
    ("_per_s", "per second"),
    ("_ms", "ms"),
    ("_bytes", "bytes"),
    ("_seconds", "s"),
    ("_ratio", "ratio"),
)


def unit_of(field: str) -> str:
    """The unit of a field's number, from its name: ``ttl_ms`` → ``ms``, ``segment_bytes`` →
    ``bytes``, ``reclaim_dead_ratio`` → ``ratio`` (a fraction from 0 to 1), ``timestamp`` → ms since
    the epoch; ``""`` for counts, offsets and shards. A nested name (``records[0].ttl_ms``) counts by
    its last part."""
    name = field.rsplit(".", 1)[-1]
    if name in _UNIT_BY_NAME:
        return _UNIT_BY_NAME[name]
    return next((unit for ending, unit in _UNIT_BY_ENDING if name.endswith(ending)), "")


def bound_text(n: float) -> str:
    """A bound in decimal digits, a whole float without its ``.0`` (``1.0`` → ``1``)."""
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(n)


def amount(n: float, field: str = "") -> str:
    """``n`` with the field's unit: ``1 ms``, ``1024 bytes``, ``12`` (a count or a ratio)."""
    unit = unit_of(field)
    return bound_text(n) if unit in ("", "ratio") else f"{bound_text(n)} {unit}"


def int_rule(minimum: int, maximum: int, field: str = "") -> str:
    """The rule an integer argument breaks, with its bounds and the field's unit (one wording for
    every field): ``must be an integer from 1 to 9223372036854775807 ms``."""
    unit = unit_of(field)
    tail = "" if unit in ("", "ratio") else f" {unit}"
    return f"must be an integer from {bound_text(minimum)} to {bound_text(maximum)}{tail}"


def range_rule(field: str, minimum: float | None, maximum: float | None) -> str:
    """The rule a number outside ``minimum..maximum`` breaks (``None``: no bound on that side), in
    the field's unit: ``must be at least 1 ms``, ``must be at most 17179869184 bytes``, ``must be a
    ratio from 0 to 1``."""
    if unit_of(field) == "ratio" and minimum is not None and maximum is not None:
        return f"must be a ratio from {bound_text(minimum)} to {bound_text(maximum)}"
    if maximum is None:
        return f"must be at least {amount(minimum if minimum is not None else MIN_INT64, field)}"
    if minimum is None:
        return f"must be at most {amount(maximum, field)}"
    return f"must be from {bound_text(minimum)} to {amount(maximum, field)}"


def int_ok(value: object, minimum: int = MIN_INT64, maximum: int = MAX_INT64) -> TypeGuard[int]:
    """An ``int`` (never a ``bool``) within ``minimum..maximum``. Callers put the value in no
    message: a 5,000-digit integer cannot even be printed."""
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= maximum


def finite_number(value: object) -> TypeGuard[int | float]:
    """An int within signed 64 bits or a finite float (never a bool, NaN or ±Infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return int_ok(value)
