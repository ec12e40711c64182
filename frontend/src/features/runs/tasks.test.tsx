// @vitest-environment jsdom
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import actions from "../../test/actions.json";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { User } from "../../api/types";
import { namespace } from "../../test/fixtures";
import { callsTo, clearCookies, jsonResponse, mockFetch, renderApp, taskRun } from "../../test/utils";

const operator: User = { username: "olga", role: "operator" };
const ns = namespace("orders");
const page = <T,>(results: T[]) => ({ next: null, previous: null, results });
const runsUrls = (fetch: ReturnType<typeof mockFetch>) => callsTo(fetch, "GET", "/api/runs/").map((c) => String(c[0]));

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("tasks: manual runs are not buried", () => {
  it("filters manual, scheduled and failed runs", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([
        taskRun(3, { kind: "expiry_scan", namespace: null, node: "node-1", schedule: "sweep", started_by: null, origin: "scheduled", state: "succeeded", sweeps: 12, window_start: "2024-05-01T10:00:00Z", window_end: "2024-05-01T11:00:00Z", namespaces_changed: ["orders"] }),
      ]),
    });
    renderApp("/tasks?namespace=orders");
    expect((await screen.findByTestId("run-folded-3")).textContent).toMatch(/^12 sweeps, \d\d:00–\d\d:59$/);
    expect(screen.getByTestId("run-changed-3").textContent).toBe("changed orders");
    expect(screen.getByTestId("runs-view-all").getAttribute("aria-pressed")).toBe("true");
    fireEvent.click(screen.getByTestId("runs-view-manual"));
    await waitFor(() => expect(runsUrls(fetch).at(-1)).toBe("/api/runs/?namespace=orders&origin=manual"));
    expect(screen.getByTestId("runs-view-manual").getAttribute("aria-pressed")).toBe("true");
    fireEvent.click(screen.getByTestId("runs-view-failed"));
    await waitFor(() => expect(runsUrls(fetch).at(-1)).toBe("/api/runs/?state=failed&namespace=orders"));
    fireEvent.change(screen.getByTestId("runs-filter-origin"), { target: { value: "scheduled" } });
    await waitFor(() => expect(runsUrls(fetch).at(-1)).toBe("/api/runs/?state=failed&namespace=orders&origin=scheduled"));
  });
});

describe("tasks: sweeps that found nothing are hidden unless asked for", () => {
  it("the idle filter asks the API for them and the row says so", async () => {
    const idle = taskRun(5, { kind: "reclaim", namespace: null, node: "node-1", schedule: "sweep", origin: "scheduled", state: "succeeded", sweeps: 3600, idle: true, window_start: "2024-05-01T10:00:00Z", window_end: "2024-05-01T11:00:00Z" });
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": (url: string) => jsonResponse(page(url.includes("idle=true") ? [idle] : [])),
    });
    renderApp("/tasks");
    expect(await screen.findByText("No runs match")).toBeTruthy();
    expect(screen.getByTestId("runs-fold-hint").textContent).toContain("found nothing to do are hidden");
    fireEvent.change(screen.getByTestId("runs-filter-idle"), { target: { value: "true" } });
    await waitFor(() => expect(runsUrls(fetch).at(-1)).toBe("/api/runs/?idle=true"));
    expect((await screen.findByTestId("run-folded-5")).textContent).toMatch(/^3,600 sweeps, .* · nothing to do$/);
  });
});

describe("the namespace's runs tab", () => {
  it("lists the node-wide sweeps that changed it, with their summed counts", async () => {
    const sweep = taskRun(9, {
      kind: "expiry_scan",
      namespace: null,
      node: "node-1",
      schedule: "lifecycle: expiry_scan of node node-1",
      started_by: null,
      origin: "scheduled",
      state: "succeeded",
      steps: 42,
      sweeps: 42,
      counts: { scanned: 120, expired_records: 96 },
      window_start: "2024-05-01T10:00:00Z",
      window_end: "2024-05-01T11:00:00Z",
      namespaces_changed: ["audit", "orders"],
    });
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/orders/": ns,
      "GET /api/runs/": page([sweep]),
    });
    renderApp("/namespaces/orders?tab=runs");
    expect((await screen.findByTestId("run-folded-9")).textContent).toMatch(/^42 sweeps, /);
    expect(runsUrls(fetch).at(-1)).toBe("/api/runs/?namespace=orders");
    expect(screen.getByTestId("run-changed-9").textContent).toBe("changed audit, orders");
    expect(screen.getByTestId("run-counts-9").textContent).toContain("expired records 96");
    expect(within(screen.getByTestId("run-changed-9")).getByText("audit").getAttribute("href")).toBe("/namespaces/audit");
  });
});

describe("tasks: a run the node skipped says why", () => {
  it("shows the skip reason under the state, and nothing for a run that worked", async () => {
    const reason = "the policy keeps these segments in the object store only: raise local_retention_ms";
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([
        taskRun(7, { kind: "recall", state: "succeeded", params: { manual: true, skipped: "policy", skipped_reason: reason } }),
        taskRun(8, { kind: "recall", state: "succeeded", params: { manual: true } }),
      ]),
    });
    renderApp("/tasks");
    expect((await screen.findByTestId("run-skipped-7")).textContent).toBe(`skipped: ${reason}`);
    expect(screen.getByTestId("run-row-8")).toBeTruthy();
    expect(screen.queryByTestId("run-skipped-8")).toBeNull();
  });
});

describe("tasks: a started run links to itself", () => {
  it("after Start, the new run opens and is marked in the list", async () => {
    let started = false;
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": () => jsonResponse(page(started ? [taskRun(21, { kind: "expiry_scan" }), taskRun(20)] : [taskRun(20)])),
      "GET /api/actions": actions,
      "POST /api/namespaces/orders/actions": () => {
        started = true;
        return jsonResponse(taskRun(21, { kind: "expiry_scan" }), 202);
      },
      "GET /api/runs/21/": taskRun(21, { kind: "expiry_scan", state: "succeeded", counts: { expired_records: 7 } }),
    });
    const { router } = renderApp("/tasks");
    await screen.findByTestId("run-row-20");
    await waitFor(() => expect(within(screen.getByTestId("start-target")).queryByText("orders")).not.toBeNull());
    fireEvent.change(screen.getByTestId("start-target"), { target: { value: "orders" } });
    fireEvent.click(await screen.findByTestId("action-expiry_scan"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/namespaces/orders/actions").length).toBe(1));
    await waitFor(() => expect(router.state.location.search).toBe("?run=21"));
    const detail = await screen.findByTestId("run-detail");
    expect(detail.textContent).toContain("Run #21");
    await waitFor(() => expect(screen.getByTestId("run-detail-state").textContent).toBe("succeeded"));
    expect(screen.getByTestId("run-detail-counts").textContent).toContain("expired records");
    expect(screen.getByTestId("action-run-link").getAttribute("href")).toBe("/tasks?run=21");
    await waitFor(() => expect(screen.getByTestId("run-row-21").getAttribute("data-highlighted")).toBe("true"));
    expect(screen.getByTestId("run-row-20").getAttribute("data-highlighted")).toBeNull();
    // Each run in the list links to itself, keeping the filters.
    expect(screen.getByTestId("run-link-20").getAttribute("href")).toBe("/tasks?run=20");
    fireEvent.click(screen.getByTestId("run-detail-close"));
    await waitFor(() => expect(screen.queryByTestId("run-detail")).toBeNull());
    expect(router.state.location.search).toBe("");
  });

  it("opens a run from a deep link, and says when it is gone", async () => {
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([taskRun(7, { state: "failed", error: "node unavailable" })]),
      "GET /api/runs/7/": taskRun(7, { state: "failed", error: "node unavailable" }),
    });
    renderApp("/tasks?run=7&namespace=orders");
    expect((await screen.findByTestId("run-detail-error")).textContent).toContain("node unavailable");
    expect(screen.getByTestId("run-link-7").getAttribute("href")).toBe("/tasks?run=7&namespace=orders");
    expect(screen.getByTestId("run-row-7").getAttribute("aria-current")).toBe("true");
  });

  it("a recall run shows its kind and its counts, bytes as sizes, in the list and the detail", async () => {
    const recall = taskRun(8, {
      kind: "recall",
      state: "succeeded",
      counts: { scanned: 12, segments_recalled: 3, bytes_recalled: 3 * 1024 * 1024 },
    });
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([recall]),
      "GET /api/runs/8/": recall,
    });
    renderApp("/tasks?run=8");
    const counts = await screen.findByTestId("run-counts-8");
    expect(counts.textContent).toContain("segments recalled 3");
    expect(counts.textContent).toContain("bytes recalled 3 MiB");
    expect(screen.getByTestId("run-row-8").textContent).toContain("Recall");
    await waitFor(() => expect(screen.getByTestId("run-detail-counts").textContent).toContain("bytes recalled"));
    expect(screen.getByTestId("run-detail-counts").textContent).toContain("3 MiB");
  });

  it("a run that no longer exists is explained", async () => {
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([ns]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([]),
    });
    renderApp("/tasks?run=99");
    expect((await screen.findByTestId("run-detail")).textContent).toMatch(/Loading|does not exist/);
    await waitFor(() => expect(screen.getByTestId("run-detail").textContent).toContain("does not exist"));
  });
});
