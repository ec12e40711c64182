// @vitest-environment jsdom
import { screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { MetricRange, MetricSeries, User } from "../../api/types";
import { openingRange, RANGE_MS } from "./metrics";
import { callsTo, clearCookies, mockFetch, renderApp } from "../../test/utils";

vi.mock("../../components/EChart", () => ({
  EChart: (props: { ariaLabel: string }) => <div role="img" aria-label={props.ariaLabel} data-testid="echart" />,
}));

const viewer: User = { username: "vic", role: "viewer" };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A series whose one line has a sample at each of ``ages`` (ms before now) that ``range`` reaches, as the API answers. */
const samplesAged = (series: string, range: MetricRange, ages: number[]): MetricSeries => {
  const now = Date.now();
  const within = ages.filter((age) => age <= RANGE_MS[range]);
  return {
    series,
    unit: "ratio",
    range,
    step_s: 60,
    resolution: "raw",
    lines: [{ labels: { node: "node-1" }, points: within.map((age) => [now - age, 0.5] as [number, number]) }],
  } as MetricSeries;
};

const seriesCalls = (fetch: ReturnType<typeof mockFetch>) =>
  callsTo(fetch, "GET", "/api/metrics/series").map((c) => new URL(String(c[0]), "http://x").searchParams);

function overview(ages: number[]) {
  return mockFetch({
    "GET /api/auth/me": viewer,
    "GET /api/metrics/summary": { stored_bytes: 0, stored_records: 0, expired_ratio: 0, backlog_messages: 0, nodes: [] },
    "GET /api/metrics/series": (url: string) => {
      const q = new URL(url, "http://x").searchParams;
      const range = q.get("range") as MetricRange;
      return new Response(JSON.stringify(samplesAged(q.get("series")!, range, ages)), { headers: { "content-type": "application/json" } });
    },
  });
}

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
});

describe("the range the Overview opens on", () => {
  it("reaches back to data older than the usual 24 h instead of opening empty", async () => {
    const fetch = overview([3 * DAY, 2 * DAY]); // a system stopped two days ago
    renderApp("/");
    await waitFor(() => expect(screen.getByTestId("range-7d").getAttribute("aria-pressed")).toBe("true"));
    await waitFor(() => expect(seriesCalls(fetch).some((q) => q.get("series") === "expired_ratio" && q.get("range") === "7d")).toBe(true));
    // Never drawn on the empty range: the only 24 h question is the probe's, of the disk series.
    expect(seriesCalls(fetch).filter((q) => q.get("range") === "24h").map((q) => q.get("series"))).toEqual(["disk_used_ratio"]);
  });

  it("opens on the last hour when all the data is that young", async () => {
    const fetch = overview([20 * 60_000, 60_000]); // a fresh `make up`
    renderApp("/");
    await waitFor(() => expect(screen.getByTestId("range-1h").getAttribute("aria-pressed")).toBe("true"));
    await waitFor(() => expect(seriesCalls(fetch).some((q) => q.get("series") === "backlog_messages" && q.get("range") === "1h")).toBe(true));
    expect(seriesCalls(fetch).some((q) => q.get("range") === "30d")).toBe(false); // the last 24 h held data: no further question
  });

  it("keeps the range the URL names", async () => {
    const fetch = overview([3 * DAY]);
    renderApp("/?range=6h");
    await waitFor(() => expect(seriesCalls(fetch).some((q) => q.get("series") === "expired_ratio" && q.get("range") === "6h")).toBe(true));
    expect(screen.getByTestId("range-6h").getAttribute("aria-pressed")).toBe("true");
    expect(seriesCalls(fetch).some((q) => q.get("range") !== "6h")).toBe(false); // no probe needed
  });
});

describe("openingRange", () => {
  const now = 1_700_000_000_000;
  it.each([
    [[], "24h"],
    [[now - 30 * 60_000], "1h"],
    [[now - 5 * HOUR, now - HOUR], "6h"],
    [[now - 3 * DAY, now - HOUR], "24h"], // data now: the usual range at most, even with older samples
    [[now - 3 * DAY, now - 2 * DAY], "7d"],
    [[now - 20 * DAY], "30d"],
    [[now - 90 * DAY], "24h"], // nothing in any range: the usual one
  ] as const)("samples %j open %s", (times, range) => {
    expect(openingRange([...times], now)).toBe(range);
  });
});
