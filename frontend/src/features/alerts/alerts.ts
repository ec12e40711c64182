// Alert rule thresholds: ratios are typed and shown as percentages.

import type { Alert, AlertRule } from "../../api/types";
import { formatPercent, type ParseResult, tryParseRatio } from "../../lib/format";

/** Metrics whose values are 0–1 ratios (by the Prometheus naming convention). */
export const isRatioMetric = (metric: string) => /ratio$/.test(metric);

/** "20%" → 0.2, "0.2" → 0.2, "1000" → 1000, "1,000" → 1000. */
export function parseThreshold(text: string): ParseResult<number> {
  const t = text.trim();
  if (!t) return { ok: false, error: "Enter a threshold." };
  if (t.endsWith("%")) return tryParseRatio(t);
  const n = Number(t.replace(/[,_]/g, ""));
  if (!Number.isFinite(n)) return { ok: false, error: `'${t}' is not a number; use e.g. 0.2, 20% or 1000.` };
  return { ok: true, value: n };
}

/** A threshold for display and editing: ratio metrics as percent. */
export function formatThreshold(metric: string, value: number): string {
  return isRatioMetric(metric) ? formatPercent(value, 4) : String(value);
}

/** The metric an alert watched: its own copy (kept after its rule is deleted), else its rule's, if listed. */
export function alertMetric(alert: Pick<Alert, "metric" | "rule">, rules: Pick<AlertRule, "id" | "metric">[] | undefined): string | undefined {
  if (alert.metric) return alert.metric;
  return alert.rule === null ? undefined : rules?.find((r) => r.id === alert.rule)?.metric;
}

/**
 * How a closed alert's history reads. Only an alert that fired shows "fired → resolved"; the server drops
 * a pending alert that clears (as Prometheus does), but older servers kept those as "resolved".
 */
export function alertTimeline(alert: Pick<Alert, "fired_at">): "fired" | "never-fired" {
  return alert.fired_at ? "fired" : "never-fired";
}
