// Issue 16: charts span the selected range; the disk forecast text is the server's, and says when there
// is not enough history yet.
import { describe, expect, it } from "vitest";
import type { MetricSeries } from "../../api/types";
import { forecastPendingText, forecastText, RANGE_MS, seriesOption, timeAxisBounds } from "./metrics";

const NOW = Date.UTC(2030, 0, 1, 12);
const wm = { max_used: 0.75, clean_forcibly: 0.85, warning: 0.9 };

const backlog: MetricSeries = {
  series: "backlog_messages",
  unit: "messages",
  range: "1h",
  step_s: 15,
  resolution: "raw",
  // 24 s of data: the axis must still cover the hour.
  lines: [{ labels: { namespace: "orders" }, points: [[NOW - 24_000, 3468], [NOW, 6017]] }],
};

describe("time axis", () => {
  it("covers the selected range whatever the data covers", () => {
    const opt = seriesOption(backlog, "Backlog", "1h", NOW) as { xAxis: { min: number; max: number } };
    expect(opt.xAxis.max - opt.xAxis.min).toBe(RANGE_MS["1h"]);
    expect(opt.xAxis.max).toBe(NOW);
    const day = seriesOption(backlog, "Backlog", "24h", NOW) as { xAxis: { min: number; max: number } };
    expect(day.xAxis.max - day.xAxis.min).toBe(RANGE_MS["24h"]);
  });
  it("ends at the newest point when the browser's clock is behind, and after the forecast shown", () => {
    expect(timeAxisBounds(backlog, "1h", NOW - 5_000)).toEqual({ min: NOW - RANGE_MS["1h"], max: NOW });
    const forecast: [number, number][] = [[NOW, 0.5], [NOW + 3_600_000, 0.6]];
    expect(timeAxisBounds(backlog, "6h", NOW, forecast)).toEqual({ min: NOW - RANGE_MS["6h"], max: NOW + 3_600_000 });
  });
  it("leaves the axis to ECharts without a range (unchanged callers)", () => {
    const opt = seriesOption(backlog, "Backlog") as { xAxis: Record<string, unknown> };
    expect(opt.xAxis.min).toBeUndefined();
  });
});

describe("disk forecast text", () => {
  const disk: MetricSeries = {
    series: "disk_used_ratio",
    unit: "ratio",
    range: "1h",
    step_s: 15,
    resolution: "raw",
    lines: [{ labels: { node: "n1" }, points: [[NOW, 0.5]] }],
    watermarks: wm,
    forecast: [],
    forecast_node: "n1",
    forecast_history_s: 300,
    forecast_min_history_s: 1800,
    forecast_warning_at: null,
  };
  it("says a forecast needs more history until the server has one", () => {
    expect(forecastPendingText(disk)).toBe("No forecast yet: it needs 30m of disk history of n1 (5m so far).");
    expect(forecastText(disk, NOW)).toBe(forecastPendingText(disk));
  });
  it("takes the crossing time from the server, not from the line", () => {
    // The line would cross 0.9 at +20 h; the server says +30 h (its own fit): the server wins.
    const day: [number, number][] = Array.from({ length: 25 }, (_, h) => [NOW + h * 3_600_000, 0.5 + 0.02 * h]);
    const ready = { ...disk, forecast: day, forecast_history_s: 3600, forecast_warning_at: NOW + 30 * 3_600_000 };
    expect(forecastPendingText(ready)).toBeNull();
    expect(forecastText(ready, NOW)).toMatch(/^Forecast: reaches the warning watermark \(90%\) in about 1d 6h \(.+\)\.$/);
    expect(forecastText({ ...ready, forecast_warning_at: null }, NOW)).toBe(
      "Forecast: not reaching the warning watermark (90%) within 1d.",
    );
  });
});
