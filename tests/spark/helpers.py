"""Small builders for the Spark tests."""

from __future__ import annotations

from typing import Any

from spark_jobs.schema import RECORD_SCHEMA

DAY_MS = 86_400_000
JAN1_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def record(**fields: Any) -> tuple[Any, ...]:
    """A row in RECORD_SCHEMA order; unspecified fields get plain defaults."""
    defaults: dict[str, Any] = {
        "namespace": "orders",
        "shard": 0,
        "offset": 0,
        "timestamp": JAN1_MS,
        "key": b"k",
        "tags": [],
        "value": b"value",
        "expire_at": None,
    }
    unknown = set(fields) - set(defaults)
    if unknown:
        raise TypeError(f"unknown record fields: {sorted(unknown)}")
    defaults.update(fields)
    return tuple(defaults[name] for name in RECORD_SCHEMA.fieldNames())
