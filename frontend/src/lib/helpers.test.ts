import { describe, expect, it } from "vitest";
import { ApiError, withQuery } from "../api/client";
import type { MetricSeries } from "../api/types";
import { formatThreshold, isRatioMetric, parseThreshold } from "../features/alerts/alerts";
import { auditDiffRows, formatAuditValue, shallowDiff } from "../features/audit/audit";
import {
  EMPTY_SEGMENT_FILTERS,
  formFromSearch,
  localInputToIso,
  searchFromForm,
  segmentFilterParams,
} from "./filters";
import { jumpSearch, messageQueryFromSearch, nextPageSearch, outOfRangeMessage, outOfRangeOf } from "../features/messages/messages";
import {
  diskLevel,
  forecastCrossing,
  forecastHorizonMs,
  forecastText,
  formatMetric,
  latestValue,
  lineName,
  markLabelLayout,
  seriesOption,
  seriesSummary,
  trimForecast,
} from "../features/overview/metrics";
import { compareValues, nextSort, sortRows } from "./table";

const MiB = 1024 ** 2;
const NOW = Date.UTC(2024, 4, 1, 12, 0, 0);

describe("withQuery", () => {
  it("appends non-empty params in order", () => {
    expect(withQuery("/api/x/", { a: 1, b: "", c: null, d: false, e: undefined, f: "a b" })).toBe("/api/x/?a=1&d=false&f=a+b");
    expect(withQuery("/api/x/", {})).toBe("/api/x/");
    expect(withQuery("/api/x/?state=firing", { page_size: 20 })).toBe("/api/x/?state=firing&page_size=20");
    expect(withQuery("/api/x/", { n: Number.NaN })).toBe("/api/x/");
  });
});

describe("segmentFilterParams", () => {
  it("turns typed filters into API params", () => {
    const { params, errors } = segmentFilterParams(
      {
        ...EMPTY_SEGMENT_FILTERS,
        namespace: " orders ",
        shard: "2",
        state: "sealed",
        min_size: "64 MiB",
        max_size: "1 GiB",
        older_than: "7d",
        newer_than: "30d",
        min_expired_ratio: "20%",
        ordering: "-size_bytes",
        page_size: "100",
      },
      NOW,
    );
    expect(errors).toEqual({});
    expect(params).toEqual({
      namespace: "orders",
      shard: 2,
      state: "sealed",
      min_size: 64 * MiB,
      max_size: 1024 * MiB,
      older_than: NOW - 7 * 86_400_000,
      newer_than: NOW - 30 * 86_400_000,
      min_expired_ratio: 0.2,
      ordering: "-size_bytes",
      page_size: 100,
    });
  });

  it("leaves out empty filters", () => {
    expect(segmentFilterParams(EMPTY_SEGMENT_FILTERS, NOW).params).toEqual({ ordering: "-max_timestamp", page_size: 50 });
  });

  it("explains each bad field", () => {
    const { errors, params } = segmentFilterParams(
      { ...EMPTY_SEGMENT_FILTERS, shard: "x", min_size: "2 GiB", max_size: "1 GiB", older_than: "soon", min_expired_ratio: "150%" },
      NOW,
    );
    expect(Object.keys(errors).sort()).toEqual(["max_size", "min_expired_ratio", "older_than", "shard"]);
    expect(errors.max_size).toMatch(/at least the smallest/);
    expect(params.shard).toBeUndefined();
  });

  it("rejects infinite sizes and ages", () => {
    const { errors } = segmentFilterParams({ ...EMPTY_SEGMENT_FILTERS, min_size: "infinite", older_than: "never" }, NOW);
    expect(errors.min_size).toMatch(/finite/);
    expect(errors.older_than).toMatch(/finite/);
  });
});

describe("form ⇄ search params", () => {
  it("round-trips and omits defaults", () => {
    const form = { ...EMPTY_SEGMENT_FILTERS, namespace: "orders", ordering: "-size_bytes" };
    const search = searchFromForm(form, EMPTY_SEGMENT_FILTERS);
    expect(search).toEqual({ namespace: "orders", ordering: "-size_bytes" });
    expect(formFromSearch(new URLSearchParams(search), EMPTY_SEGMENT_FILTERS)).toEqual(form);
  });

  it("converts datetime-local input (browser zone) to ISO", () => {
    const iso = localInputToIso("2024-05-01T12:30")!;
    expect(new Date(iso).getHours()).toBe(12);
    expect(new Date(iso).getMinutes()).toBe(30);
    expect(localInputToIso("")).toBeUndefined();
    expect(localInputToIso("garbage")).toBeUndefined();
  });
});

describe("messages query", () => {
  const q = (s: string) => messageQueryFromSearch(new URLSearchParams(s));
  it("needs a namespace and a shard", () => {
    expect(q("").problem).toMatch(/namespace/);
    expect(q("namespace=orders").problem).toMatch(/shard/);
  });
  it("reads offset, time, key and tag modes", () => {
    expect(q("namespace=o&shard=1&offset=10").query).toEqual({ shard: 1, offset: "10", limit: 50, display: "text" });
    expect(q("namespace=o&shard=0&time=1714564800000&limit=500&display=hex").query).toEqual({
      shard: 0,
      time: "1714564800000", // 64-bit figures stay decimal text: a JS number loses digits past 2^53
      limit: 200,
      display: "hex",
    });
    expect(q("namespace=o&shard=0&key=k1&time=5").query).toEqual({ shard: 0, key: "k1", limit: 50, display: "text" });
    expect(q("namespace=o&shard=0&tag=t&offset=7").query).toEqual({ shard: 0, tag: "t", offset: "7", limit: 50, display: "text" });
  });
  it("the next page starts at next_offset and drops the time", () => {
    const next = nextPageSearch(new URLSearchParams("namespace=o&shard=0&time=5&tag=t"), { next_offset: 42, next_positions: null });
    expect(next.get("offset")).toBe("42");
    expect(next.get("time")).toBeNull();
    expect(next.get("tag")).toBe("t");
  });
  it("without a shard: a key (its own shard first, or every shard) or a time, paged by positions", () => {
    expect(q("namespace=o&key=k1").query).toEqual({ key: "k1", limit: 50, display: "text" });
    expect(q("namespace=o&key=k1&all_shards=true").query).toEqual({ key: "k1", all_shards: true, limit: 50, display: "text" });
    expect(q("namespace=o&time=5").query).toEqual({ time: "5", limit: 50, display: "text" });
    expect(q("namespace=o&offset=5").problem).toMatch(/key or by time/);
    expect(q("namespace=o&tag=t").problem).toMatch(/shard/);
    expect(q("namespace=o&shard=x&time=5").problem).toMatch(/shard/);
    const next = nextPageSearch(new URLSearchParams("namespace=o&time=5"), { next_offset: null, next_positions: "0:3,1:7" });
    expect(next.get("positions")).toBe("0:3,1:7");
    expect(next.get("time")).toBeNull();
    expect(q(next.toString()).query).toEqual({ positions: "0:3,1:7", limit: 50, display: "text" });
  });
  it("explains a read below the log start and jumps there", () => {
    const body = {
      type: "tag:lifecycle-store,2025:problem/offset_out_of_range",
      title: "Offset out of range",
      status: 416,
      detail: "x",
      code: "offset_out_of_range",
      instance: "/api/namespaces/o/messages",
      namespace: "o",
      shard: 1,
      offset: 3,
      log_start_offset: 40,
      end_offset: 90,
      below_log_start: true,
    };
    const o = outOfRangeOf(new ApiError(416, "x", {}, body));
    expect(o && outOfRangeMessage(o)).toBe("offset 3 is below the log start 40 (deleted by retention/expiry)");
    expect(outOfRangeMessage({ ...body, offset: 95, below_log_start: false })).toBe("offset 95 is past the end of shard 1 (end offset 90)");
    expect(outOfRangeOf(new ApiError(400, "x", {}, body))).toBeNull();
    expect(outOfRangeOf(new Error("x"))).toBeNull();
    const jumped = jumpSearch(new URLSearchParams("namespace=o&shard=1&offset=3&limit=20"), 40);
    expect(jumped.toString()).toBe("namespace=o&shard=1&offset=40&limit=20");
  });
});

describe("metrics", () => {
  const wm = { max_used: 0.75, clean_forcibly: 0.85, warning: 0.9 };
  it("places disk use against the watermarks", () => {
    expect(diskLevel(0.5, wm)).toBe("ok");
    expect(diskLevel(0.75, wm)).toBe("max_used");
    expect(diskLevel(0.86, wm)).toBe("clean_forcibly");
    expect(diskLevel(0.95, wm)).toBe("warning");
  });
  it("formats values by unit", () => {
    expect(formatMetric(0.2, "ratio")).toBe("20%");
    expect(formatMetric(1536, "bytes")).toBe("1.5 KiB");
    expect(formatMetric(1234.4, "messages")).toBe("1,234 msgs");
    expect(formatMetric(3.14159, "count")).toBe("3.14");
    expect(formatMetric(null, "ratio")).toBe("—");
  });
  it("names lines by their labels", () => {
    expect(lineName({ node: "n1" }, "x")).toBe("n1");
    expect(lineName({}, "Disk")).toBe("Disk");
  });
  const data: MetricSeries = {
    series: "disk_used_ratio",
    unit: "ratio",
    range: "1h",
    step_s: 60,
    resolution: "raw",
    lines: [
      { labels: { node: "n1" }, points: [[NOW - 60_000, 0.5], [NOW, 0.6]] },
      { labels: { node: "n2" }, points: [[NOW, 0.3]] },
    ],
    watermarks: wm,
    forecast: [[NOW + 3_600_000, 0.7]],
  };
  it("builds chart series with watermark lines and a forecast", () => {
    const opt = seriesOption(data, "Disk used") as { series: Record<string, unknown>[]; yAxis: { max?: number } };
    expect(opt.series.map((s) => s.name)).toEqual(["n1", "n2", "forecast"]);
    const mark = opt.series[0]!.markLine as { data: { name: string; yAxis: number }[] };
    expect(mark.data.map((m) => [m.name, m.yAxis])).toEqual([
      ["max used", 0.75],
      ["clean forcibly", 0.85],
      ["warning", 0.9],
    ]);
    expect(opt.series[2]!.data).toEqual([[NOW + 3_600_000, 0.7]]);
    expect(opt.yAxis.max).toBe(1);
  });
  it("takes the watermarks from a line when the series has none", () => {
    const perLine: MetricSeries = { ...data, watermarks: undefined, lines: [{ ...data.lines[0]!, watermarks: { max_used: 0.7, clean_forcibly: 0.8, warning: 0.95 } }] };
    const opt = seriesOption(perLine, "Disk used") as { series: Record<string, unknown>[] };
    const mark = opt.series[0]!.markLine as { data: { yAxis: number }[] };
    expect(mark.data.map((m) => m.yAxis)).toEqual([0.7, 0.8, 0.95]);
    const none = seriesOption({ ...data, watermarks: undefined }, "x") as { series: Record<string, unknown>[] };
    expect(none.series[0]!.markLine).toBeUndefined();
  });
  it("summarises the latest value per line", () => {
    expect(seriesSummary(data, "Disk used")).toMatch(/^Disk used: n1 60% at .*; n2 30% at .*\.$/);
    expect(seriesSummary({ ...data, lines: [] }, "Disk used")).toBe("Disk used: no data in this range.");
  });
  it("reads the latest value: the highest line's last point", () => {
    expect(latestValue(data, "Disk used")).toEqual({ value: 0.6, at: NOW, line: "n1", lines: 2 });
    const one: MetricSeries = { ...data, lines: [{ labels: {}, points: [[NOW - 5_000, 0.97], [NOW, 0]] }] };
    expect(latestValue(one, "Expired ratio")).toEqual({ value: 0, at: NOW, line: "Expired ratio", lines: 1 });
    expect(latestValue({ ...data, lines: [{ labels: { node: "n1" }, points: [] }] }, "x")).toBeNull();
  });

  // The server forecasts hourly for 24 h: from 0.5 now, +0.02 an hour.
  const day: [number, number][] = Array.from({ length: 25 }, (_, h) => [NOW + h * 3_600_000, 0.5 + 0.02 * h]);
  it("cuts the forecast to the chart's range, at most 24 h", () => {
    expect(forecastHorizonMs("1h")).toBe(3_600_000);
    expect(forecastHorizonMs("6h")).toBe(6 * 3_600_000);
    expect(forecastHorizonMs("7d")).toBe(24 * 3_600_000);
    expect(trimForecast(day, 3_600_000)).toEqual([day[0], day[1]]);
    const half = trimForecast(day, 1_800_000);
    expect(half).toHaveLength(2);
    expect(half[1]![0]).toBe(NOW + 1_800_000);
    expect(half[1]![1]).toBeCloseTo(0.51);
    expect(trimForecast(day, 24 * 3_600_000)).toEqual(day);
    expect(trimForecast([], 3_600_000)).toEqual([]);
  });
  it("keeps the chart's time axis within the range: 1 h back, 1 h of forecast", () => {
    const opt = seriesOption({ ...data, forecast: day }, "Disk used", "1h") as { series: { name: string; data: [number, number][] }[] };
    const forecast = opt.series.find((s) => s.name === "forecast")!;
    expect(Math.max(...forecast.data.map((p) => p[0]))).toBe(NOW + 3_600_000);
    const week = seriesOption({ ...data, forecast: day }, "Disk used", "7d") as { series: { name: string; data: unknown[] }[] };
    expect(week.series.find((s) => s.name === "forecast")!.data).toHaveLength(25);
  });
  it("finds when the forecast reaches a watermark and says so", () => {
    expect(forecastCrossing(day, 0.9)).toBe(NOW + 20 * 3_600_000);
    expect(forecastCrossing(day, 0.51)).toBeCloseTo(NOW + 1_800_000);
    expect(forecastCrossing(day, 0.4)).toBe(NOW);
    expect(forecastCrossing(day, 0.99)).toBeNull();
    const text = forecastText({ ...data, forecast: day }, NOW);
    expect(text).toMatch(/^Forecast: reaches the warning watermark \(90%\) in about 20h \(.+\)\.$/);
    expect(forecastText({ ...data, forecast: day, watermarks: { ...wm, warning: 0.99 } }, NOW)).toBe(
      "Forecast: not reaching the warning watermark (99%) within 1d.",
    );
    const low: MetricSeries = { ...data, lines: [{ labels: { node: "n1" }, points: [[NOW, 0.45]] }] };
    expect(forecastText({ ...low, forecast: day, watermarks: { ...wm, warning: 0.5 } }, NOW)).toBe(
      "Forecast: at or above the warning watermark (50%) now.",
    );
    expect(forecastText({ ...data, forecast: [] }, NOW)).toBeNull();
    const full: MetricSeries = { ...data, forecast: day, lines: [{ labels: { node: "n1" }, points: [[NOW, 0.93]] }] };
    expect(forecastText(full, NOW)).toBe("Above the warning watermark (90%) now: the node rejects writes.");
  });
  it("puts the labels of close watermarks on separate rows", () => {
    const overlaps = (ratios: number[], width = 0.26) => {
      const layout = markLabelLayout(ratios, width);
      const span = (r: number, i: number) => {
        const a = layout[i]!.align;
        const from = a === "end" ? r - width : a === "start" ? r : r - width / 2;
        return [from, from + width] as const;
      };
      return ratios.some((r, i) =>
        ratios.some((q, j) => j > i && layout[i]!.lane === layout[j]!.lane && span(r, i)[0] < span(q, j)[1] && span(q, j)[0] < span(r, i)[1]),
      );
    };
    const close = markLabelLayout([0.75, 0.85, 0.9]);
    expect(new Set(close.map((l) => l.lane)).size).toBe(3);
    expect(close[2]!.align).toBe("end");
    expect(overlaps([0.75, 0.85, 0.9])).toBe(false);
    expect(overlaps([0.8, 0.81, 0.82])).toBe(false);
    expect(overlaps([0.05, 0.5, 0.98])).toBe(false);
    expect(markLabelLayout([0.2, 0.5, 0.8]).map((l) => l.lane)).toEqual([0, 0, 0]);
    expect(markLabelLayout([0.02])[0]!.align).toBe("start");
  });
});

describe("audit diff", () => {
  it("uses the server diff when present, sorted by field", () => {
    expect(auditDiffRows({ diff: { b: { before: 1, after: 2 }, a: { before: null, after: "x" } }, before: null, after: null })).toEqual([
      { field: "a", before: null, after: "x" },
      { field: "b", before: 1, after: 2 },
    ]);
  });
  it("computes a shallow diff otherwise", () => {
    expect(shallowDiff({ a: 1, b: { x: 1 }, c: 3 }, { a: 1, b: { x: 2 }, d: 4 })).toEqual([
      { field: "b", before: { x: 1 }, after: { x: 2 } },
      { field: "c", before: 3, after: undefined },
      { field: "d", before: undefined, after: 4 },
    ]);
    expect(auditDiffRows({ diff: {}, before: null, after: { a: 1 } })).toEqual([{ field: "a", before: undefined, after: 1 }]);
  });
  it("formats cells", () => {
    expect(formatAuditValue(undefined)).toBe("(absent)");
    expect(formatAuditValue(null)).toBe("null");
    expect(formatAuditValue("x")).toBe("x");
    expect(formatAuditValue({ a: [1] })).toBe('{"a":[1]}');
  });
});

describe("table sorting", () => {
  const rows = [
    { n: "b", v: 2, t: "2024-05-01T10:00:00Z" },
    { n: "a10", v: null, t: null },
    { n: "a2", v: 10, t: "2024-04-30T10:00:00Z" },
  ];
  const get = (r: (typeof rows)[number], k: "n" | "v" | "t") => r[k];
  it("sorts numbers, strings (naturally) and dates, missing values last", () => {
    expect(sortRows(rows, { key: "v", dir: "asc" }, get).map((r) => r.n)).toEqual(["b", "a2", "a10"]);
    expect(sortRows(rows, { key: "v", dir: "desc" }, get).map((r) => r.n)).toEqual(["a2", "b", "a10"]);
    expect(sortRows(rows, { key: "n", dir: "asc" }, get).map((r) => r.n)).toEqual(["a2", "a10", "b"]);
    expect(sortRows(rows, { key: "t", dir: "desc" }, get).map((r) => r.n)).toEqual(["b", "a2", "a10"]);
  });
  it("flips direction on the same key", () => {
    expect(nextSort({ key: "a", dir: "asc" }, "a")).toEqual({ key: "a", dir: "desc" });
    expect(nextSort<"a" | "b">({ key: "a", dir: "asc" }, "b", "desc")).toEqual({ key: "b", dir: "desc" });
    expect(compareValues(true, false)).toBeGreaterThan(0);
  });
});

describe("alert thresholds", () => {
  it("parses percents and numbers", () => {
    expect(parseThreshold("20%")).toEqual({ ok: true, value: 0.2 });
    expect(parseThreshold("1,000")).toEqual({ ok: true, value: 1000 });
    expect(parseThreshold("").ok).toBe(false);
    expect(parseThreshold("lots").ok).toBe(false);
  });
  it("shows ratio metrics as percent", () => {
    expect(isRatioMetric("disk_used_ratio")).toBe(true);
    expect(formatThreshold("expired_ratio", 0.2)).toBe("20%");
    expect(formatThreshold("delete_queue_length", 5000)).toBe("5000");
  });
});
