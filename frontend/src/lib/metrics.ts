// Metrics helpers: disk level against the three node watermarks, and the
// ECharts option for a metric series (lines, watermark lines, forecast).

import type { MetricRange, MetricSeries, MetricUnit, Watermarks } from "../api/types";
import { formatBytes, formatCount, formatDateTime, formatPercent } from "./format";

export const RANGES: MetricRange[] = ["1h", "6h", "24h", "7d", "30d"];

export type DiskLevel = "ok" | "max_used" | "clean_forcibly" | "warning";

/** Which watermark the disk use has reached (the highest one at or above). */
export function diskLevel(ratio: number, w: Watermarks): DiskLevel {
  if (ratio >= w.warning) return "warning";
  if (ratio >= w.clean_forcibly) return "clean_forcibly";
  if (ratio >= w.max_used) return "max_used";
  return "ok";
}

export const DISK_LEVEL_TEXT: Record<DiskLevel, string> = {
  ok: "below all watermarks",
  max_used: "above max used: expired files are deleted at any hour",
  clean_forcibly: "above clean-forcibly: oldest files are deleted even if not expired",
  warning: "above warning: the node rejects writes (disk full)",
};

export const DISK_LEVEL_TONE: Record<DiskLevel, "ok" | "warn" | "fail"> = {
  ok: "ok",
  max_used: "warn",
  clean_forcibly: "fail",
  warning: "fail",
};

/** A value in a series' unit, for axes and tooltips. */
export function formatMetric(value: number | null | undefined, unit: MetricUnit | string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  switch (unit) {
    case "ratio":
      return formatPercent(value);
    case "bytes":
      return formatBytes(value);
    case "messages":
      return `${formatCount(Math.round(value))} msgs`;
    default:
      return formatCount(Math.round(value * 100) / 100);
  }
}

/** "node=n1, namespace=orders" → a short legend name. */
export function lineName(labels: Record<string, string>, fallback: string): string {
  const parts = Object.values(labels).filter(Boolean);
  return parts.length ? parts.join(" / ") : fallback;
}

const WATERMARK_LINES: [keyof Watermarks, string, string][] = [
  ["max_used", "max used", "#c98a00"],
  ["clean_forcibly", "clean forcibly", "#d4590f"],
  ["warning", "warning", "#a4161a"],
];

/** ECharts option for one metric series; pure so it can be tested without a canvas. */
export function seriesOption(data: MetricSeries, title: string): Record<string, unknown> {
  const unit = data.unit;
  const series: Record<string, unknown>[] = data.lines.map((line, i) => ({
    type: "line",
    name: lineName(line.labels, data.lines.length > 1 ? `${title} ${i + 1}` : title),
    data: line.points,
    showSymbol: false,
    smooth: false,
  }));
  // The node's watermarks: on the series, else on the first line that has them.
  const wm = data.watermarks ?? data.lines.find((l) => l.watermarks)?.watermarks ?? null;
  if (wm && series.length > 0) {
    series[0] = {
      ...series[0],
      markLine: {
        silent: true,
        symbol: "none",
        data: WATERMARK_LINES.map(([key, label, color]) => ({
          name: label,
          yAxis: wm[key],
          lineStyle: { color, type: "dashed" },
          label: { formatter: `${label} ${formatMetric(wm[key], unit)}`, position: "insideEndTop" },
        })),
      },
    };
  }
  if (data.forecast && data.forecast.length > 0) {
    series.push({
      type: "line",
      name: "forecast",
      data: data.forecast,
      showSymbol: false,
      lineStyle: { type: "dotted", width: 2 },
    });
  }
  return {
    animation: false,
    grid: { left: 64, right: 24, top: 36, bottom: 32 },
    legend: { top: 0, type: "scroll" },
    tooltip: {
      trigger: "axis",
      valueFormatter: (v: number) => formatMetric(v, unit),
    },
    xAxis: {
      type: "time",
      axisLabel: { hideOverlap: true },
    },
    yAxis: {
      type: "value",
      min: unit === "ratio" ? 0 : undefined,
      max: unit === "ratio" ? 1 : undefined,
      axisLabel: { formatter: (v: number) => formatMetric(v, unit) },
    },
    series,
  };
}

/** Plain-text summary of a series for screen readers: latest value per line. */
export function seriesSummary(data: MetricSeries, title: string): string {
  if (data.lines.length === 0) return `${title}: no data in this range.`;
  const parts = data.lines.map((line) => {
    const last = line.points.at(-1);
    return `${lineName(line.labels, title)} ${last ? `${formatMetric(last[1], data.unit)} at ${formatDateTime(last[0])}` : "no data"}`;
  });
  return `${title}: ${parts.join("; ")}.`;
}
