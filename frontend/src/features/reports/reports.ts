// Lifecycle report helpers: the lifetime histogram's labels, thresholds, wording. The totals over the
// days shown are the control plane's (reports selectors, issue 16): the report tab renders them and
// never adds the rows up itself.

import type { LifecycleReportTotals, LifetimeHistogram } from "../../api/types";
import { formatDuration } from "../../lib/format";

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

export interface HistogramBar {
  key: keyof LifetimeHistogram;
  label: string;
  records: number;
  /** share of the records that have an expiry (0–1); null when none has */
  share: number | null;
}

/**
 * The lifetime histogram of the days shown, in bucket order, labelled: the server's sums and shares
 * (``totals`` of GET …/reports/lifecycle/summary), taken as they are. Nothing is added up here.
 */
export function lifetimeBars(totals: LifecycleReportTotals): HistogramBar[] {
  return LIFETIME_BUCKETS.map((b) => ({
    ...b,
    records: totals.lifetime_histogram[b.key] ?? 0,
    share: totals.lifetime_shares[b.key] ?? null,
  }));
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
