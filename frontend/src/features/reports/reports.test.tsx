// @vitest-environment jsdom
// The namespace page's "Lifecycle report" tab, with mocked API responses (as in pages.test.tsx).
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { TaskRun, User } from "../../api/types";
import { namespaceRow } from "../../test/fixtures";
import { reportRow } from "../../test/reports";
import { lifecycleReport } from "../../test/reportTotals";
import { body, callsTo, clearCookies, jsonResponse, mockFetch, renderApp, taskRun } from "../../test/utils";

const operator: User = { username: "olga", role: "operator" };
const viewer: User = { username: "vic", role: "viewer" };

const ns = namespaceRow("orders");

const run = (id: number, extra: Partial<TaskRun> = {}): TaskRun =>
  taskRun(id, { kind: "lifecycle_report", node: "node-1", params: { job: "lifecycle-report" }, ...extra });

const REPORT = "/api/namespaces/orders/reports/lifecycle/summary";

const routes = (user: User, extra: Record<string, unknown> = {}) => ({
  "GET /api/auth/me": user,
  "GET /api/namespaces/orders/": ns,
  ...extra,
});

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("namespace lifecycle report", () => {
  it("shows one row per day, newest first, with the server's totals and lifetime distribution", async () => {
    const rows = [
      reportRow("2024-01-02", { records: 300, bytes: 3 * 1024 ** 2, expired_records: 0, expired_ratio: 0, superseded_bytes: 1024 ** 2 }),
      reportRow("2024-01-01", { lifetime_p50_ms: null, lifetime_p90_ms: null, lifetime_p99_ms: null }),
    ];
    // Issue 16: the totals are the control plane's. They are deliberately not the rows' sums (400 records,
    // 25 expired, …) here: the tab must render what the server sent, never add the rows up itself.
    const totals = {
      records: 12_345,
      bytes: 5 * 1024 ** 2,
      expired_ratio: 0.0625,
      duplicate_key_ratio: 0.4,
      superseded_bytes: 7 * 1024 ** 2,
      unbounded_records: 77,
      lifetime_histogram: { le_1m: 1, le_1h: 81, le_1d: 2, le_7d: 3, le_30d: 0, gt_30d: 0 },
      lifetime_shares: { le_1m: 0.01, le_1h: 0.87, le_1d: 0.05, le_7d: 0.07, le_30d: 0, gt_30d: 0 },
    };
    const fetch = mockFetch(routes(viewer, { [`GET ${REPORT}`]: lifecycleReport(rows, totals) }));
    renderApp("/namespaces/orders?tab=report");
    const newest = await screen.findByTestId("report-row-2024-01-02");
    expect(newest.textContent).toContain("Tue 2 Jan 2024");
    expect(newest.textContent).toContain("300");
    expect(newest.textContent).toContain("3 MiB");
    expect(newest.textContent).toContain("0%");
    expect(newest.textContent).toContain("1h / 5h / 1d"); // lifetime p50 / p90 / p99
    expect(newest.textContent).toContain("1s / 11m 40s"); // past expiry p50 / max
    expect(newest.textContent).toContain("1 MiB"); // reclaimable by compaction
    const older = screen.getByTestId("report-row-2024-01-01");
    expect(older.textContent).toContain("25%");
    expect(older.textContent).toContain("—"); // no lifetimes that day
    const shown = screen.getAllByTestId(/^report-row-/).map((r) => r.getAttribute("data-testid"));
    expect(shown).toEqual(["report-row-2024-01-02", "report-row-2024-01-01"]);
    expect(screen.getByTestId("report-total-records").textContent).toBe("Records (2 days)12,345");
    expect(screen.getByTestId("report-total-bytes").textContent).toContain("5 MiB");
    expect(screen.getByTestId("report-total-expired-ratio").textContent).toContain("6.3%");
    expect(screen.getByTestId("report-total-duplicate-ratio").textContent).toContain("40%");
    expect(screen.getByTestId("report-total-reclaimable").textContent).toContain("7 MiB");
    expect(screen.getByTestId("report-lifetimes").previousElementSibling?.textContent).toContain("77 records never expire");
    expect(screen.getByTestId("report-lifetime-le_1h").textContent).toBe("≤ 1 h8187%");
    expect(screen.getByTestId("report-generated").textContent).toContain("Generated");
    // Viewers read; only operators run the report.
    expect(screen.queryByTestId("report-run")).toBeNull();
    expect(String(callsTo(fetch, "GET", REPORT)[0]![0])).toBe(`${REPORT}?days=30`);
    fireEvent.change(screen.getByTestId("report-days"), { target: { value: "90" } });
    await waitFor(() => expect(String(callsTo(fetch, "GET", REPORT).at(-1)![0])).toBe(`${REPORT}?days=90`));
  });

  it("an empty report says how to run it; an operator runs it and sees the run finish", async () => {
    let reportCalls = 0;
    const fetch = mockFetch(
      routes(operator, {
        [`GET ${REPORT}`]: () => jsonResponse(lifecycleReport(reportCalls++ === 0 ? [] : [reportRow("2024-01-01")])),
        "POST /api/spark-jobs": () => jsonResponse(run(9), 202),
        "GET /api/runs/9/": run(9, { state: "succeeded", finished_at: "2024-05-01T12:01:00Z" }),
      }),
    );
    renderApp("/namespaces/orders?tab=report");
    const empty = await screen.findByTestId("report-empty");
    expect(empty.textContent).toContain("python -m spark_jobs lifecycle-report");
    expect(empty.textContent).toContain("Run report below");
    fireEvent.click(screen.getByTestId("report-run"));
    await waitFor(() => expect(screen.getByTestId("report-run-status").textContent).toContain("#9"));
    expect(body(callsTo(fetch, "POST", "/api/spark-jobs")[0]!)).toEqual({ job: "lifecycle-report", namespace: "orders" });
    // The run is followed until it succeeds; then the report is loaded again.
    await screen.findByTestId("report-row-2024-01-01");
    expect(screen.getByTestId("report-run-status").textContent).toContain("succeeded");
    expect((screen.getByTestId("report-run") as HTMLButtonElement).disabled).toBe(false);
  });

  it("a refused start shows why; a failing report load shows an error with a retry", async () => {
    mockFetch(
      routes(operator, {
        [`GET ${REPORT}`]: () => jsonResponse({ detail: "boom" }, 500),
        "POST /api/spark-jobs": () => jsonResponse({ job: ["a lifecycle-report run is already running (run 3)"] }, 400),
      }),
    );
    renderApp("/namespaces/orders?tab=report");
    const error = await screen.findByTestId("report-error");
    expect(error.textContent).toContain("Could not load the lifecycle report");
    expect(error.textContent).toContain("Retry");
    fireEvent.click(screen.getByTestId("report-run"));
    expect((await screen.findByTestId("report-run-error")).textContent).toContain("already running (run 3)");
  });

  it("a server without reports says the feature is not available yet", async () => {
    mockFetch(routes(viewer, { [`GET ${REPORT}`]: () => jsonResponse({ detail: "Not found." }, 404) }));
    renderApp("/namespaces/orders?tab=report");
    expect(await screen.findByTestId("report-unavailable")).toBeTruthy();
    expect(screen.getByTestId("tab-report").getAttribute("aria-selected")).toBe("true");
  });
});
