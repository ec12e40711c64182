from __future__ import annotations

from typing import Any

from rest_framework import serializers

from backend.apps.core.serializers import StrictSerializer
from backend.apps.reports import jobs
from backend.apps.reports.models import REPORT_FIELDS, LifecycleReportRow

MAX_ROWS = 100_000
LIFETIME_BUCKETS = ("le_1m", "le_1h", "le_1d", "le_7d", "le_30d", "gt_30d")  # spark_jobs.transforms


def _count(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, **kwargs)


def _ratio() -> serializers.FloatField:
    return serializers.FloatField(min_value=0.0, max_value=1.0, allow_null=True)


def _ms(min_value: int | None = None) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=min_value, allow_null=True)


class LifetimeHistogramSerializer(serializers.Serializer):
    """Records per lifetime bucket (upper bounds inclusive); records without an expiry are in none."""

    le_1m = _count()
    le_1h = _count()
    le_1d = _count()
    le_7d = _count()
    le_30d = _count()
    gt_30d = _count()


class LifecycleReportRowInputSerializer(serializers.Serializer):
    namespace = serializers.CharField(max_length=200)
    date = serializers.DateField(help_text="UTC day of the records' timestamps")
    records = _count()
    bytes = _count()
    expired_records = _count()
    expired_bytes = _count()
    expired_ratio = _ratio()
    expired_bytes_ratio = _ratio()
    unbounded_records = _count()
    # Lifetime = effective expiry − timestamp: negative for a record produced already expired.
    lifetime_p50_ms = _ms()
    lifetime_p90_ms = _ms()
    lifetime_p99_ms = _ms()
    lifetime_histogram = LifetimeHistogramSerializer()
    overdue_p50_ms = _ms(0)
    overdue_p90_ms = _ms(0)
    overdue_p99_ms = _ms(0)
    overdue_max_ms = _ms(0)
    keyed_records = _count()
    superseded_records = _count()
    superseded_bytes = _count()
    duplicate_key_ratio = _ratio()
    now_ms = _count()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        parts = [
            ("expired_records", "records"),
            ("unbounded_records", "records"),
            ("keyed_records", "records"),
            ("superseded_records", "keyed_records"),
            ("expired_bytes", "bytes"),
            ("superseded_bytes", "bytes"),
        ]
        errors = {part: [f"must not exceed {whole}"] for part, whole in parts if attrs[part] > attrs[whole]}
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class LifecycleReportInputSerializer(serializers.Serializer):
    """What ``python -m spark_jobs lifecycle-report --post-url`` sends."""

    generated_at = serializers.DateTimeField()
    rows = LifecycleReportRowInputSerializer(many=True, max_length=MAX_ROWS)

    def validate_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen: set[tuple[str, Any]] = set()
        for row in rows:
            key = (row["namespace"], row["date"])
            if key in seen:
                raise serializers.ValidationError(f"{row['namespace']} on {row['date']} appears twice")
            seen.add(key)
        return rows


class LifecycleReportResultSerializer(serializers.Serializer):
    generated_at = serializers.DateTimeField()
    stored = serializers.IntegerField(help_text="rows inserted or replaced")
    stale = serializers.IntegerField(help_text="rows skipped: the stored row comes from a later report")
    unknown_namespaces = serializers.ListField(
        child=serializers.CharField(), help_text="namespaces this control plane does not know (their rows skipped)"
    )


class LifecycleReportQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(min_value=1, max_value=366, default=30, help_text="the most recent report days")


class LifecycleReportRowOutputSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")
    lifetime_histogram = LifetimeHistogramSerializer()

    class Meta:
        model = LifecycleReportRow
        fields = ["namespace", "day", *REPORT_FIELDS, "generated_at", "received_at"]
        read_only_fields = fields


class SparkJobInputSerializer(StrictSerializer):
    job = serializers.CharField(max_length=100, help_text="a job of `python -m spark_jobs`, e.g. lifecycle-report")
    namespace = serializers.CharField(max_length=200, required=False, allow_null=True, default=None)
    params = serializers.DictField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=dict,
        help_text="job options: ttl-backfill takes tag or key_prefix, and ttl (e.g. 7d)",
    )

    def validate(self, attrs: dict) -> dict:
        errors = jobs.check_params(attrs["job"], attrs["params"])
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def validate_job(self, job: str) -> str:
        known = jobs.registered_jobs()
        if job not in known:
            raise serializers.ValidationError(f"must be one of {', '.join(known) or '(none registered)'}")
        return job
