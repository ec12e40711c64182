// Issue 16: a chart's value axis has round ticks with distinct labels (whole numbers for counts), and the
// readout beside a chart is the same current figure as the Overview card.
import { describe, expect, it } from "vitest";
import type { MetricSeries, MetricsSummary } from "../../api/types";
import { chartReadout, seriesOption, valueAxis } from "./metrics";

const NOW = Date.UTC(2030, 0, 1, 12);
const wm = { max_used: 0.75, clean_forcibly: 0.85, warning: 0.9 };

type Axis = { min: number; max: number; interval: number; minInterval?: number; axisLabel: { formatter: (v: number) => string } };
const ticks = (axis: Axis) => {
  const out: string[] = [];
  for (let v = axis.min; v <= axis.max + axis.interval / 2; v += axis.interval) out.push(axis.axisLabel.formatter(v));
  return out;
};
const series = (unit: MetricSeries["unit"], ...values: number[][]): MetricSeries => ({
  series: "x",
  unit,
  range: "1h",
  step_s: 12,
  resolution: "raw",
  lines: values.map((vs, i) => ({ labels: { namespace: `ns${i}` }, points: vs.map((v, j) => [NOW - (vs.length - 1 - j) * 12_000, v] as [number, number]) })),
});

describe("chart value axis", () => {
  it("gives a small backlog whole-number ticks: never '1 msgs, 1 msgs, 0 msgs'", () => {
    const axis = valueAxis(series("messages", [0, 1, 1, 0]), "messages") as Axis;
    expect(axis.minInterval).toBe(1);
    expect(axis.interval).toBe(1);
    expect(ticks(axis)).toEqual(["0 msgs", "1 msgs"]);
    const two = seriesOption(series("messages", [0, 2]), "Backlog") as { yAxis: Axis };
    expect(ticks(two.yAxis)).toEqual(["0 msgs", "1 msgs", "2 msgs"]);
  });

  it("keeps count labels distinct for step averages below one", () => {
    const axis = valueAxis(series("count", [0.25, 0.5, 0.4]), "count") as Axis;
    expect(axis.minInterval).toBe(1);
    expect(ticks(axis)).toEqual(["0", "1"]);
  });

  it("labels a bytes axis in one unit with distinct labels, and reaches the highest value", () => {
    const axis = valueAxis(series("bytes", [1.1 * 1024 ** 2, 2.9 * 1024 ** 2]), "bytes") as Axis;
    expect(ticks(axis)).toEqual(["0 MiB", "1 MiB", "2 MiB", "3 MiB"]);
    const small = valueAxis(series("bytes", [0, 3]), "bytes") as Axis;
    expect(small.minInterval).toBe(1);
    expect(ticks(small)).toEqual(["0 B", "1 B", "2 B", "3 B"]);
  });

  it("keeps a ratio axis at 0–100 % for the watermarks", () => {
    const axis = seriesOption({ ...series("ratio", [0.5, 0.6]), watermarks: wm }, "Disk used").yAxis as Axis;
    expect([axis.min, axis.max]).toEqual([0, 1]);
    expect(ticks(axis)).toEqual(["0%", "20%", "40%", "60%", "80%", "100%"]);
  });
});

describe("chart readout", () => {
  const summary = {
    stored_bytes: 0,
    stored_records: 100,
    expired_ratio: 0.97,
    backlog_messages: 6017,
    nodes: [
      { name: "n1", disk_used_ratio: 0.5, disk_used_bytes: 5, disk_capacity_bytes: 10, watermarks: wm, forecast_warning_at: null },
      { name: "n2", disk_used_ratio: 0.8, disk_used_bytes: 8, disk_capacity_bytes: 10, watermarks: wm, forecast_warning_at: null },
      { name: "n3", disk_used_ratio: null, disk_used_bytes: null, disk_capacity_bytes: null, watermarks: wm, forecast_warning_at: null },
    ],
  } as MetricsSummary;

  it("is the card's field, not the chart's last point (which was a 48 % partial step average)", () => {
    const chart = series("ratio", [0, 0.485]);
    expect(chartReadout("expired_ratio", chart, summary, "Expired ratio")).toEqual({ value: 0.97, source: "summary", of: null, highest: null, at: null });
    const two = series("messages", [3000, 3468], [2549]);
    expect(chartReadout("backlog_messages", two, summary, "Backlog")).toMatchObject({ value: 6017, highest: { line: "ns0", value: 3468 } });
  });

  it("takes disk use from the summary's nodes: the fullest one, named when several report", () => {
    const disk = series("ratio", [0.4]);
    expect(chartReadout("disk_used_ratio", disk, summary, "Disk used")).toEqual({ value: 0.8, source: "summary", of: "n2", highest: null, at: null });
    const one = { ...summary, nodes: summary.nodes.slice(0, 1) };
    expect(chartReadout("disk_used_ratio", disk, one, "Disk used")).toMatchObject({ value: 0.5, of: null });
  });

  it("is the highest line's latest sample without a card or a summary", () => {
    const queues = series("messages", [3, 4], [9, 7]);
    expect(chartReadout("celery_queue_depth", queues, summary, "Task queues")).toEqual({ value: 7, source: "series", of: "ns1", highest: null, at: NOW });
    expect(chartReadout("expired_ratio", series("ratio", [0.2, 0.3]), undefined, "Expired ratio")).toMatchObject({ value: 0.3, source: "series" });
    expect(chartReadout("delete_queue_length", undefined, summary, "Delete queue")).toBeNull();
  });
});
