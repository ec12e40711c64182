import { describe, expect, it } from "vitest";
import { reportRow } from "../test/reports";
import {
  expiredTone,
  formatPercentiles,
  formatReportDay,
  formatReportDuration,
  lifetimeDistribution,
  reportTotals,
} from "./reports";

describe("reportTotals", () => {
  it("sums the days and weights the ratios by records, not by days", () => {
    const totals = reportTotals([
      reportRow("2024-01-02", { records: 300, expired_records: 0, keyed_records: 100, superseded_records: 0 }),
      reportRow("2024-01-01", { records: 100, expired_records: 100, keyed_records: 100, superseded_records: 50 }),
    ]);
    expect(totals.days).toBe(2);
    expect(totals.records).toBe(400);
    expect(totals.bytes).toBe(20_000);
    expect(totals.expiredRatio).toBe(0.25); // 100 of 400, not the mean of 0 and 1
    expect(totals.duplicateKeyRatio).toBe(0.25); // 50 of 200 keyed
    expect(totals.reclaimableBytes).toBe(3_000);
    expect(totals.unboundedRecords).toBe(20);
  });

  it("has no ratios without records", () => {
    const totals = reportTotals([]);
    expect(totals.expiredRatio).toBeNull();
    expect(totals.duplicateKeyRatio).toBeNull();
    expect(totals.records).toBe(0);
  });
});

describe("lifetimeDistribution", () => {
  it("sums the histograms in bucket order with shares of the records that expire", () => {
    const bars = lifetimeDistribution([reportRow("2024-01-02"), reportRow("2024-01-01", { lifetime_histogram: { le_1m: 5, le_1h: 0, le_1d: 0, le_7d: 5, le_30d: 0, gt_30d: 100 } })]);
    expect(bars.map((b) => b.key)).toEqual(["le_1m", "le_1h", "le_1d", "le_7d", "le_30d", "gt_30d"]);
    expect(bars.map((b) => b.records)).toEqual([10, 40, 40, 10, 0, 100]);
    expect(bars[5]!.share).toBe(0.5);
    expect(bars[0]!.label).toBe("≤ 1 min");
  });

  it("has no shares when no record expires", () => {
    const none = { le_1m: 0, le_1h: 0, le_1d: 0, le_7d: 0, le_30d: 0, gt_30d: 0 };
    expect(lifetimeDistribution([reportRow("2024-01-01", { lifetime_histogram: none })]).every((b) => b.share === null)).toBe(true);
  });
});

describe("formatting", () => {
  it("formats durations, with a word for records produced already expired", () => {
    expect(formatReportDuration(5_400_000)).toBe("1h 30m");
    expect(formatReportDuration(null)).toBe("—");
    expect(formatReportDuration(-1_000)).toBe("already expired");
  });

  it("joins percentiles, or shows one dash when there are none", () => {
    expect(formatPercentiles([3_600_000, 18_000_000, 86_400_000])).toBe("1h / 5h / 1d");
    expect(formatPercentiles([null, null, null])).toBe("—");
  });

  it("marks an expired ratio above the alert threshold", () => {
    expect(expiredTone(0.25)).toBe("warn");
    expect(expiredTone(0.2)).toBe("ok");
    expect(expiredTone(null)).toBe("neutral");
  });

  it("shows a UTC day as that day in any browser zone", () => {
    expect(formatReportDay("2024-01-01")).toBe("Mon 1 Jan 2024");
    expect(formatReportDay("not-a-day")).toBe("not-a-day");
  });
});
