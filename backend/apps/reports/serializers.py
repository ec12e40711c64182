from __future__ import annotations

from typing import Any

from rest_framework import serializers

from backend.apps.core.serializers import StrictSerializer
from backend.apps.reports import jobs
from backend.apps.reports.models import REPORT_FIELDS, LifecycleReportRow

MAX_ROWS = 100_000


def _count(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, **kwargs)


def _ratio(**kwargs: Any) -> serializers.FloatField:
    return serializers.FloatField(min_value=0.0, max_value=1.0, allow_null=True, **kwargs)


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


class LifetimeSharesSerializer(serializers.Serializer):
    """Each bucket's share of the records that have an expiry (0–1); null when none has."""

    le_1m = _ratio()
    le_1h = _ratio()
    le_1d = _ratio()
    le_7d = _ratio()
    le_30d = _ratio()
    gt_30d = _ratio()


class LifecycleReportTotalsSerializer(serializers.Serializer):
    """The report's days taken together (``selectors.report_totals``): sums, and ratios of the sums."""

    days = _count(help_text="report days summed (at most the days asked for)")
    first_day = serializers.DateField(allow_null=True, help_text="the oldest of them")
    last_day = serializers.DateField(allow_null=True, help_text="the newest of them")
    records = _count()
    bytes = _count()
    expired_records = _count()
    expired_bytes = _count()
    expired_ratio = _ratio(help_text="expired_records ÷ records; null without records")
    expired_bytes_ratio = _ratio(help_text="expired_bytes ÷ bytes; null without bytes")
    unbounded_records = _count(help_text="records without an expiry")
    keyed_records = _count()
    superseded_records = _count()
    superseded_bytes = _count(help_text="what compaction would reclaim")
    duplicate_key_ratio = _ratio(help_text="superseded_records ÷ keyed_records; null without keyed records")
    lifetime_histogram = LifetimeHistogramSerializer(help_text="the days' histograms added up per bucket")
    lifetime_shares = LifetimeSharesSerializer()


class LifecycleReportOutputSerializer(serializers.Serializer):
    """The namespace's report: the rows (as the list endpoint answers them) and their totals."""

    namespace = serializers.CharField()
    rows = LifecycleReportRowOutputSerializer(many=True, help_text="one per day, newest first")
    totals = LifecycleReportTotalsSerializer(help_text="over the rows sent, from the same read")


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
