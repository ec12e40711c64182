// Test fixtures for lifecycle reports.
import type { LifecycleReportRow } from "../api/types";

/** One report day as GET /api/namespaces/<name>/reports/lifecycle answers it. */
export const reportRow = (day: string, extra: Partial<LifecycleReportRow> = {}): LifecycleReportRow => ({
  namespace: "orders",
  day,
  records: 100,
  bytes: 10_000,
  expired_records: 25,
  expired_bytes: 2_000,
  expired_ratio: 0.25,
  expired_bytes_ratio: 0.2,
  unbounded_records: 10,
  lifetime_p50_ms: 3_600_000,
  lifetime_p90_ms: 18_000_000,
  lifetime_p99_ms: 86_400_000,
  lifetime_histogram: { le_1m: 5, le_1h: 40, le_1d: 40, le_7d: 5, le_30d: 0, gt_30d: 0 },
  overdue_p50_ms: 1_000,
  overdue_p90_ms: 60_000,
  overdue_p99_ms: 600_000,
  overdue_max_ms: 700_000,
  keyed_records: 80,
  superseded_records: 20,
  superseded_bytes: 1_500,
  duplicate_key_ratio: 0.25,
  now_ms: 1_704_153_600_000,
  generated_at: "2024-01-02T00:00:00Z",
  received_at: "2024-01-02T00:00:05Z",
  ...extra,
});
