import { describe, expect, it } from "vitest";
import { withQuery } from "../api/client";
import type { MetricSeries } from "../api/types";
import { formatThreshold, isRatioMetric, parseThreshold } from "./alerts";
import { auditDiffRows, formatAuditValue, shallowDiff } from "./audit";
import {
  EMPTY_SEGMENT_FILTERS,
  formFromSearch,
  localInputToIso,
  searchFromForm,
  segmentFilterParams,
} from "./filters";
import { messageQueryFromSearch, nextPageSearch } from "./messages";
import { diskLevel, formatMetric, lineName, seriesOption, seriesSummary } from "./metrics";
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
    expect(q("namespace=o&shard=1&offset=10").query).toEqual({ shard: 1, offset: 10, limit: 50, display: "text" });
    expect(q("namespace=o&shard=0&time=1714564800000&limit=500&display=hex").query).toEqual({
      shard: 0,
      time: 1714564800000,
      limit: 200,
      display: "hex",
    });
    expect(q("namespace=o&shard=0&key=k1&time=5").query).toEqual({ shard: 0, key: "k1", limit: 50, display: "text" });
    expect(q("namespace=o&shard=0&tag=t&offset=7").query).toEqual({ shard: 0, tag: "t", offset: 7, limit: 50, display: "text" });
  });
  it("the next page starts at next_offset and drops the time", () => {
    const next = nextPageSearch(new URLSearchParams("namespace=o&shard=0&time=5&tag=t"), 42);
    expect(next.get("offset")).toBe("42");
    expect(next.get("time")).toBeNull();
    expect(next.get("tag")).toBe("t");
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
    step_s: 60,
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
    expect(auditDiffRows({ diff: null, before: null, after: { a: 1 } })).toEqual([{ field: "a", before: undefined, after: 1 }]);
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
