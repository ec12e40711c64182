"""The numeric bounds every boundary shares (a leaf module: the policy and the validation
modules both use it, and neither may import the other's dependencies).

Offsets, timestamps, expire_at and policy durations travel as signed 64-bit integers in
the segment format, the index keys and the node's JSON: a larger number would fail deep
in ``struct`` (or in ``int.__str__``, which refuses past 4,300 digits) instead of at the
boundary with a message naming the field.
"""

from __future__ import annotations

import math
from typing import TypeGuard

MAX_INT64 = (1 << 63) - 1
MIN_INT64 = -(1 << 63)


def bound_text(n: float) -> str:
    return "2^63-1" if n == MAX_INT64 else "-2^63" if n == MIN_INT64 else str(n)


def int_rule(minimum: int, maximum: int) -> str:
    """The rule an integer argument breaks, with its bounds (one wording for every field)."""
    return f"must be an integer from {bound_text(minimum)} to {bound_text(maximum)}"


def int_ok(value: object, minimum: int = MIN_INT64, maximum: int = MAX_INT64) -> TypeGuard[int]:
    """An ``int`` (never a ``bool``) within ``minimum..maximum``. Callers put the value in no
    message: a 5,000-digit integer cannot even be printed."""
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= maximum


def finite_number(value: object) -> TypeGuard[int | float]:
    """An int within signed 64 bits or a finite float (never a bool, NaN or ±Infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return int_ok(value)
