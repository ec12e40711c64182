// Lifecycle report helpers: totals over the shown days, the lifetime histogram, thresholds, wording.

import type { LifecycleReportRow, LifetimeHistogram } from "../api/types";
import { formatDuration } from "./format";

/** The command that computes the report by hand (it POSTs here with --post-url and CONTROL_PLANE_TOKEN). */
export const REPORT_COMMAND = "python -m spark_jobs lifecycle-report";
export const REPORT_JOB = "lifecycle-report";
export const REPORT_DAY_CHOICES = [7, 30, 90] as const;
/** DESIGN §4: the default alert fires above 20 % expired but not reclaimed. */
export const EXPIRED_RATIO_WARN = 0.2;

export const LIFETIME_BUCKETS: { key: keyof LifetimeHistogram; label: string }[] = [
  { key: "le_1m", label: "≤ 1 min" },
  { key: "le_1h", label: "≤ 1 h" },
  { key: "le_1d", label: "≤ 1 day" },
  { key: "le_7d", label: "≤ 7 days" },
  { key: "le_30d", label: "≤ 30 days" },
  { key: "gt_30d", label: "> 30 days" },
];

const ratio = (part: number, whole: number): number | null => (whole > 0 ? part / whole : null);

export interface ReportTotals {
  days: number;
  records: number;
  bytes: number;
  expiredRecords: number;
  expiredBytes: number;
  /** expired ÷ stored records over all days (weighted, not a mean of daily ratios) */
  expiredRatio: number | null;
  /** superseded ÷ keyed records over all days */
  duplicateKeyRatio: number | null;
  reclaimableBytes: number;
  unboundedRecords: number;
}

export function reportTotals(rows: LifecycleReportRow[]): ReportTotals {
  let records = 0,
    bytes = 0,
    expiredRecords = 0,
    expiredBytes = 0,
    keyed = 0,
    superseded = 0,
    reclaimableBytes = 0,
    unboundedRecords = 0;
  for (const r of rows) {
    records += r.records;
    bytes += r.bytes;
    expiredRecords += r.expired_records;
    expiredBytes += r.expired_bytes;
    keyed += r.keyed_records;
    superseded += r.superseded_records;
    reclaimableBytes += r.superseded_bytes;
    unboundedRecords += r.unbounded_records;
  }
  return {
    days: rows.length,
    records,
    bytes,
    expiredRecords,
    expiredBytes,
    expiredRatio: ratio(expiredRecords, records),
    duplicateKeyRatio: ratio(superseded, keyed),
    reclaimableBytes,
    unboundedRecords,
  };
}

export interface HistogramBar {
  key: keyof LifetimeHistogram;
  label: string;
  records: number;
  /** share of the records that have an expiry (0–1); null when none has */
  share: number | null;
}

/** The lifetime histograms of the shown days summed, in bucket order. */
export function lifetimeDistribution(rows: LifecycleReportRow[]): HistogramBar[] {
  const sums = LIFETIME_BUCKETS.map((b) => rows.reduce((n, r) => n + (r.lifetime_histogram?.[b.key] ?? 0), 0));
  const total = sums.reduce((a, b) => a + b, 0);
  return LIFETIME_BUCKETS.map((b, i) => ({ ...b, records: sums[i]!, share: ratio(sums[i]!, total) }));
}

/** A lifetime or time past expiry: "1h 30m"; null (no record with an expiry) → "—"; negative → "already expired". */
export function formatReportDuration(ms: number | null | undefined): string {
  if (typeof ms === "number" && ms < 0) return "already expired";
  return formatDuration(ms);
}

/** p50 / p90 / p99 as one cell: "1h / 5h / 1d". */
export function formatPercentiles(values: (number | null | undefined)[]): string {
  return values.every((v) => v === null || v === undefined) ? "—" : values.map(formatReportDuration).join(" / ");
}

export function expiredTone(ratio: number | null | undefined): "ok" | "warn" | "neutral" {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return "neutral";
  return ratio > EXPIRED_RATIO_WARN ? "warn" : "ok";
}

const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** "2024-01-01" → "Mon 1 Jan 2024" (the day is a UTC day: never shifted into the browser's zone). */
export function formatReportDay(day: string): string {
  const date = new Date(`${day}T00:00:00Z`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || Number.isNaN(date.getTime())) return day;
  return `${WEEKDAYS[date.getUTCDay()]} ${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()}`;
}
