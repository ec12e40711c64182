// Test fixtures for the totals of a lifecycle report (issue 16: the server adds the days up).
import type { LifecycleReport, LifecycleReportRow, LifecycleReportTotals } from "../api/types";

/** The totals as GET /api/namespaces/<name>/reports/lifecycle/summary sends them; ``extra`` overrides any field. */
export const reportTotals = (extra: Partial<LifecycleReportTotals> = {}): LifecycleReportTotals => ({
  days: 2,
  first_day: "2024-01-01",
  last_day: "2024-01-02",
  records: 200,
  bytes: 20_000,
  expired_records: 50,
  expired_bytes: 4_000,
  expired_ratio: 0.25,
  expired_bytes_ratio: 0.2,
  unbounded_records: 20,
  keyed_records: 160,
  superseded_records: 40,
  superseded_bytes: 3_000,
  duplicate_key_ratio: 0.25,
  lifetime_histogram: { le_1m: 10, le_1h: 80, le_1d: 80, le_7d: 10, le_30d: 0, gt_30d: 0 },
  lifetime_shares: { le_1m: 10 / 180, le_1h: 80 / 180, le_1d: 80 / 180, le_7d: 10 / 180, le_30d: 0, gt_30d: 0 },
  ...extra,
});

/** A whole summary answer: the rows and the totals the server sends beside them. */
export const lifecycleReport = (rows: LifecycleReportRow[], totals: Partial<LifecycleReportTotals> = {}): LifecycleReport => ({
  namespace: "orders",
  rows,
  totals: reportTotals({ days: rows.length, ...totals }),
});
