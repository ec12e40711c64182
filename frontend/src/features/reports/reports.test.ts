import { describe, expect, it } from "vitest";
import { reportTotals } from "../../test/reportTotals";
import { expiredTone, formatPercentiles, formatReportDay, formatReportDuration, LIFETIME_BUCKETS, lifetimeBars } from "./reports";

describe("lifetimeBars", () => {
  it("labels the server's sums and shares in bucket order, as they are", () => {
    // Deliberately not shares of these counts: the bars show what the server sent, nothing recomputed.
    const bars = lifetimeBars(
      reportTotals({
        lifetime_histogram: { le_1m: 10, le_1h: 40, le_1d: 40, le_7d: 10, le_30d: 0, gt_30d: 100 },
        lifetime_shares: { le_1m: 0.01, le_1h: 0.02, le_1d: 0.03, le_7d: 0.04, le_30d: 0, gt_30d: 0.9 },
      }),
    );
    expect(bars.map((b) => b.key)).toEqual(["le_1m", "le_1h", "le_1d", "le_7d", "le_30d", "gt_30d"]);
    expect(bars.map((b) => b.records)).toEqual([10, 40, 40, 10, 0, 100]);
    expect(bars.map((b) => b.share)).toEqual([0.01, 0.02, 0.03, 0.04, 0, 0.9]);
    expect(bars[0]!.label).toBe("≤ 1 min");
    expect(bars.map((b) => b.label)).toEqual(LIFETIME_BUCKETS.map((b) => b.label));
  });

  it("has no shares when the server has none (no record expires)", () => {
    const none = { le_1m: null, le_1h: null, le_1d: null, le_7d: null, le_30d: null, gt_30d: null };
    expect(lifetimeBars(reportTotals({ lifetime_shares: none })).every((b) => b.share === null)).toBe(true);
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
