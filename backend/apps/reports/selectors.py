"""Reads of lifecycle reports: the rows of a namespace's most recent days, and their totals.

The totals are defined here, once, for every reader (the namespace page's report tab renders them as
they come): counts and bytes are the days' sums, a ratio is the ratio of those sums (not a mean of the
daily ratios, as the engine takes a shard's ratio from its segments; see
:mod:`backend.apps.catalog.figures`), and the lifetime histogram is the days' histograms added up per
bucket, each bucket's share taken of the records that have an expiry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet

from backend.apps.catalog.figures import ratio
from backend.apps.namespaces.models import Namespace
from backend.apps.reports.models import LIFETIME_BUCKETS, LifecycleReportRow

# The row fields the totals add up (each a count of records or bytes).
SUMMED_FIELDS = (
    "records",
    "bytes",
    "expired_records",
    "expired_bytes",
    "unbounded_records",
    "keyed_records",
    "superseded_records",
    "superseded_bytes",
)


def lifecycle_report(namespace: Namespace, days: int) -> QuerySet[LifecycleReportRow]:
    """The namespace's ``days`` most recent report days, newest first."""
    return LifecycleReportRow.objects.filter(namespace=namespace).select_related("namespace").order_by("-day")[:days]


def _share(part: float, whole: float) -> float | None:
    """``part / whole``; ``None`` (no ratio, shown as a dash) when there is nothing to divide, like a
    report row's ratios on a day without records."""
    return ratio(part, whole) if whole else None


def report_totals(rows: Sequence[LifecycleReportRow]) -> dict[str, Any]:
    """The figures of ``rows`` taken together: what the report tab shows above the table."""
    sums = {field: sum(int(getattr(row, field)) for row in rows) for field in SUMMED_FIELDS}
    histogram = {
        bucket: sum(int((row.lifetime_histogram or {}).get(bucket, 0)) for row in rows) for bucket in LIFETIME_BUCKETS
    }
    expiring = sum(histogram.values())
    days = sorted(row.day for row in rows)
    return {
        "days": len(rows),
        "first_day": days[0] if days else None,
        "last_day": days[-1] if days else None,
        **sums,
        "expired_ratio": _share(sums["expired_records"], sums["records"]),
        "expired_bytes_ratio": _share(sums["expired_bytes"], sums["bytes"]),
        "duplicate_key_ratio": _share(sums["superseded_records"], sums["keyed_records"]),
        "lifetime_histogram": histogram,
        "lifetime_shares": {bucket: _share(n, expiring) for bucket, n in histogram.items()},
    }


def lifecycle_report_with_totals(namespace: Namespace, days: int) -> dict[str, Any]:
    """The rows of :func:`lifecycle_report` and their :func:`report_totals`, from one read (the totals
    are always those of the rows sent beside them)."""
    rows = list(lifecycle_report(namespace, days))
    return {"namespace": namespace.name, "rows": rows, "totals": report_totals(rows)}
