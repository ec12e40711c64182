// Metrics helpers: disk level against the three node watermarks, and the
// ECharts option for a metric series (lines, watermark lines, forecast).

import type { MetricRange, MetricSeries, MetricSeriesName, MetricsSummary, MetricUnit, Point, Watermarks } from "../../api/types";
import { axisScale, formatBytes, formatCount, formatDateTime, formatDuration, formatPercent } from "../../lib/format";

export const RANGES: MetricRange[] = ["1h", "6h", "24h", "7d", "30d"];

const HOUR_MS = 3_600_000;
export const RANGE_MS: Record<MetricRange, number> = {
  "1h": HOUR_MS,
  "6h": 6 * HOUR_MS,
  "24h": 24 * HOUR_MS,
  "7d": 7 * 24 * HOUR_MS,
  "30d": 30 * 24 * HOUR_MS,
};
/** The range the Overview opens on when there is nothing to go by. */
export const DEFAULT_RANGE: MetricRange = "24h";
/** The series whose samples tell the Overview where data is: one line per node, every collection writes it. */
export const RANGE_PROBE_SERIES: MetricSeriesName = "disk_used_ratio";

/**
 * The range the Overview opens on, from the times of the samples there are (``now``: when they were fetched):
 * the smallest preset that holds every sample, up to the usual 24 h; when the last 24 h hold none (a system
 * stopped for days), the smallest that reaches the newest sample. No samples at all: the usual 24 h.
 */
export function openingRange(times: number[], now: number): MetricRange {
  if (times.length === 0) return DEFAULT_RANGE;
  const oldest = Math.min(...times);
  const newest = Math.max(...times);
  const holds = (r: MetricRange, t: number) => now - RANGE_MS[r] <= t;
  const usual = RANGES.filter((r) => RANGE_MS[r] <= RANGE_MS[DEFAULT_RANGE]);
  if (holds(DEFAULT_RANGE, newest)) return usual.find((r) => holds(r, oldest)) ?? DEFAULT_RANGE;
  return RANGES.find((r) => holds(r, newest)) ?? DEFAULT_RANGE;
}

/** Every sample time of a series, over all its lines. */
export function sampleTimes(data: MetricSeries): number[] {
  return data.lines.flatMap((l) => l.points.map((p) => p[0]));
}

/** The server forecasts disk use 24 h ahead; charts show at most this much of it. */
export const FORECAST_MAX_HORIZON_MS = 24 * HOUR_MS;

/** How far ahead a chart draws the forecast: as far as it looks back, at most 24 h. */
export function forecastHorizonMs(range: MetricRange): number {
  return Math.min(RANGE_MS[range], FORECAST_MAX_HORIZON_MS);
}

/** The forecast up to ``horizonMs`` after its first point; the last point is interpolated at the cut. */
export function trimForecast(points: Point[], horizonMs: number): Point[] {
  const first = points[0];
  if (!first) return [];
  const end = first[0] + horizonMs;
  const out: Point[] = [];
  for (const [i, p] of points.entries()) {
    if (p[0] <= end) {
      out.push(p);
      continue;
    }
    const prev = points[i - 1]!; // exists: the first point is never past the cut
    if (prev[0] === end) break;
    const f = (end - prev[0]) / (p[0] - prev[0]);
    out.push([end, prev[1] + f * (p[1] - prev[1])]);
    break;
  }
  return out;
}

/** When a forecast line first reaches ``threshold`` (epoch ms, interpolated), or null if it never does. */
export function forecastCrossing(points: Point[], threshold: number): number | null {
  const first = points[0];
  if (!first) return null;
  if (first[1] >= threshold) return first[0];
  for (let i = 1; i < points.length; i++) {
    const [t0, v0] = points[i - 1]!;
    const [t1, v1] = points[i]!;
    if (v1 >= threshold) return v1 === v0 ? t1 : t0 + ((threshold - v0) / (v1 - v0)) * (t1 - t0);
  }
  return null;
}

/** Not enough disk history for a forecast yet (the server says how much it has and needs), or null. */
export function forecastPendingText(data: MetricSeries): string | null {
  const needed = data.forecast_min_history_s;
  const has = data.forecast_history_s;
  if (needed === undefined || has === undefined || (data.forecast ?? []).length > 0 || has >= needed) return null;
  const node = data.forecast_node ? ` of ${data.forecast_node}` : "";
  return `No forecast yet: it needs ${formatDuration(needed * 1000)} of disk history${node} (${formatDuration(has * 1000)} so far).`;
}

/**
 * One sentence on when the disk forecast reaches the warning watermark, or null without a forecast.
 * The time is the server's (``forecast_warning_at``); only an older server that does not send it has
 * the crossing read off the forecast line.
 */
export function forecastText(data: MetricSeries, now: number): string | null {
  const pending = forecastPendingText(data);
  if (pending) return pending;
  const wm = data.watermarks ?? data.lines.find((l) => l.watermarks)?.watermarks ?? null;
  const forecast = data.forecast ?? [];
  if (!wm || forecast.length === 0) return null;
  const label = `the warning watermark (${formatPercent(wm.warning, 0)})`;
  const latest = latestValue(data, "");
  if (latest && latest.value >= wm.warning) return `Above ${label} now: the node rejects writes.`;
  const at = data.forecast_warning_at !== undefined ? data.forecast_warning_at : forecastCrossing(forecast, wm.warning);
  if (at === null) {
    return `Forecast: not reaching ${label} within ${formatDuration(Math.max(0, forecast.at(-1)![0] - now))}.`;
  }
  if (at <= now) return `Forecast: at or above ${label} now.`;
  return `Forecast: reaches ${label} in about ${formatDuration(at - now, { maxParts: 2 })} (${formatDateTime(at, { seconds: false })}).`;
}

export interface LatestValue {
  value: number;
  at: number;
  /** The line it belongs to (the highest one when there are several). */
  line: string;
  lines: number;
}

/**
 * The latest point of each line, and of those the highest (the fullest node, the worst namespace). The
 * server ends every line at its latest sample (not at a partial step average), so this is the current
 * value of the line.
 */
export function latestValue(data: MetricSeries, title: string): LatestValue | null {
  let best: Omit<LatestValue, "lines"> | null = null;
  let lines = 0;
  for (const [i, line] of data.lines.entries()) {
    const last = line.points.at(-1);
    if (!last || !Number.isFinite(last[1])) continue;
    lines += 1;
    if (best === null || last[1] > best.value) {
      const name = lineName(line.labels, data.lines.length > 1 ? `${title} ${i + 1}` : title);
      best = { value: last[1], at: last[0], line: name };
    }
  }
  return best === null ? null : { ...best, lines };
}

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
export function lineName(labels: MetricSeries["lines"][number]["labels"], fallback: string): string {
  const parts = Object.values(labels).filter(Boolean);
  return parts.length ? parts.join(" / ") : fallback;
}

const WATERMARK_LINES: [keyof Watermarks, string, string][] = [
  ["max_used", "max used", "#c98a00"],
  ["clean_forcibly", "clean forcibly", "#d4590f"],
  ["warning", "warning", "#a4161a"],
];

/** The newest point of any line, or null. */
function lastPointMs(data: MetricSeries): number | null {
  let last: number | null = null;
  for (const line of data.lines) {
    const t = line.points.at(-1)?.[0];
    if (t !== undefined && (last === null || t > last)) last = t;
  }
  return last;
}

/**
 * The time axis of a chart over ``range``: from ``range`` before now (or the newest point, if later) to
 * then, or to the end of the forecast shown. Every chart of a page spans the same range, whatever its data.
 */
export function timeAxisBounds(data: MetricSeries, range: MetricRange, now: number, forecast: Point[] = []): { min: number; max: number } {
  const end = Math.max(now, lastPointMs(data) ?? now);
  return { min: end - RANGE_MS[range], max: Math.max(end, forecast.at(-1)?.[0] ?? end) };
}

/**
 * ECharts option for one metric series; pure so it can be tested without a canvas.
 * With a ``range`` the time axis covers that range up to ``now`` (every chart the same span, even
 * one whose data covers a few seconds), and the forecast is cut to :func:`forecastHorizonMs` of it,
 * so a 1 h chart does not stretch its time axis a day into the future.
 */
export function seriesOption(data: MetricSeries, title: string, range?: MetricRange, now: number = Date.now()): Record<string, unknown> {
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
  const forecast = range && data.forecast ? trimForecast(data.forecast, forecastHorizonMs(range)) : (data.forecast ?? []);
  if (forecast.length > 0) {
    series.push({
      type: "line",
      name: "forecast",
      data: forecast,
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
      ...(range ? timeAxisBounds(data, range, now, forecast) : {}),
    },
    yAxis: valueAxis(data, unit, forecast),
    series,
  };
}

/**
 * The value axis of a chart: round steps whose labels are distinct (see :func:`axisScale`); counts step
 * by whole numbers (``minInterval`` 1: no "1 msgs, 1 msgs" from ticks at 0.5 and 1). A ratio spans
 * 0–100 % (the watermarks and the forecast are drawn against it); other units start at zero and reach
 * the highest value drawn.
 */
export function valueAxis(data: MetricSeries, unit: MetricUnit | string, forecast: Point[] = []): Record<string, unknown> {
  let lo = 0;
  let hi = unit === "ratio" ? 1 : 0;
  if (unit !== "ratio") {
    for (const points of [...data.lines.map((l) => l.points), forecast]) {
      for (const [, v] of points) {
        if (!Number.isFinite(v)) continue;
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    }
  }
  const scale = axisScale(lo, hi, unit);
  const whole = unit === "messages" || unit === "count" || (unit === "bytes" && scale.interval >= 1);
  return {
    type: "value",
    min: scale.min,
    max: scale.max,
    interval: scale.interval,
    ...(whole ? { minInterval: 1 } : {}),
    axisLabel: { formatter: scale.label },
  };
}

/** The card on the Overview showing the same figure as a chart: the summary field it reads. */
export const SUMMARY_FIELD: Partial<Record<MetricSeriesName, "expired_ratio" | "backlog_messages">> = {
  expired_ratio: "expired_ratio",
  backlog_messages: "backlog_messages",
};

export interface Readout {
  value: number;
  /** "summary": the card's own field; "series": the latest sample of the chart's lines. */
  source: "summary" | "series";
  /** The line ``value`` belongs to, where several are drawn (the fullest node, the longest queue). */
  of: string | null;
  /** Beside a cluster figure drawn as several lines: the highest line now, and its value. */
  highest: { line: string; value: number } | null;
  /** The latest sample's time (series readouts). */
  at: number | null;
}

/**
 * The current figure shown next to a chart. Where the Overview has a card for the same quantity
 * (cluster expired ratio and backlog, each node's disk use) it is the card's own field of the summary,
 * so the two never disagree: a cluster figure is the cluster's, never the worst line's nor a step
 * average. The highest line (the worst namespace) is named beside it. Without a card (or without a
 * summary) it is the highest line's latest sample.
 */
export function chartReadout(name: MetricSeriesName, data: MetricSeries | undefined, summary: MetricsSummary | undefined, title: string): Readout | null {
  const latest = data ? latestValue(data, title) : null;
  const field = SUMMARY_FIELD[name];
  if (summary && field && Number.isFinite(summary[field])) {
    const highest = latest && latest.lines > 1 ? { line: latest.line, value: latest.value } : null;
    return { value: summary[field], source: "summary", of: null, highest, at: null };
  }
  if (summary && name === "disk_used_ratio") {
    let fullest: { name: string; ratio: number } | null = null;
    let reporting = 0;
    for (const n of summary.nodes) {
      if (n.disk_used_ratio === null || !Number.isFinite(n.disk_used_ratio)) continue;
      reporting += 1;
      if (fullest === null || n.disk_used_ratio > fullest.ratio) fullest = { name: n.name, ratio: n.disk_used_ratio };
    }
    if (fullest) return { value: fullest.ratio, source: "summary", of: reporting > 1 ? fullest.name : null, highest: null, at: null };
  }
  if (!latest) return null;
  return { value: latest.value, source: "series", of: latest.lines > 1 ? latest.line : null, highest: null, at: latest.at };
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

export interface MarkLabel {
  /** 0 = the first row under the bar; close watermarks get further rows. */
  lane: number;
  /** Where the label sits against its mark: after it, centred on it, or before it (near the bar's ends). */
  align: "start" | "center" | "end";
}

/**
 * Rows for the watermark labels under a disk bar, so that close watermarks
 * (0.75 / 0.85 / 0.90) do not print over each other. ``width`` is a label's
 * width as a fraction of the bar; labels near an end are aligned inwards.
 */
export function markLabelLayout(ratios: number[], width = 0.26): MarkLabel[] {
  const placed: { lane: number; from: number; to: number }[] = [];
  return ratios.map((r) => {
    const align: MarkLabel["align"] = r > 1 - width / 2 ? "end" : r < width / 2 ? "start" : "center";
    const from = align === "end" ? r - width : align === "start" ? r : r - width / 2;
    const to = from + width;
    let lane = 0;
    while (placed.some((p) => p.lane === lane && p.from < to && from < p.to)) lane += 1;
    placed.push({ lane, from, to });
    return { lane, align };
  });
}
