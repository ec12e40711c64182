// @vitest-environment jsdom
// Issue 16: each figure is the server's, shown as it is; node health and the overall status have one source.
import { screen, waitFor, within } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { resetCsrfToken } from "../api/client";
import type { Alert, AlertStatus, Health, MetricSeries, MetricsSummary, Namespace, NamespaceSummary, StorageNode, User } from "../api/types";
import { clearCookies, jsonResponse, mockFetch, renderApp } from "../test/utils";

vi.mock("../components/EChart", () => ({
  EChart: (props: { ariaLabel: string }) => <div role="img" aria-label={props.ariaLabel} data-testid="echart" />,
}));

const viewer: User = { username: "vic", role: "viewer" };
const health: Health = { status: "ok", checked_at: new Date().toISOString(), components: { database: { ok: true, detail: "ok", last_heartbeat: null } } };
const page = <T,>(results: T[]) => ({ next: null, previous: null, results });
const wm = { max_used: 0.75, clean_forcibly: 0.85, warning: 0.9 };

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

const alert = (id: number, extra: Partial<Alert> = {}): Alert => ({
  id,
  rule: 1,
  rule_name: "Expired ratio above 20 %",
  severity: "warning",
  state: "firing",
  scope: `namespace=ns${id}`,
  metric: "expired_ratio",
  labels: { namespace: `ns${id}` },
  value: 0.4,
  threshold: 0.2,
  started_at: "2024-05-01T12:00:00Z",
  fired_at: "2024-05-01T12:05:00Z",
  resolved_at: null,
  acknowledged_by: null,
  acknowledged_at: null,
  silenced_until: null,
  silenced: false,
  summary: "40% expired",
  ...extra,
});

const summary: MetricsSummary = {
  stored_bytes: 1024 ** 3,
  stored_records: 1242,
  live_records: 750,
  expired_records: 492,
  expired_ratio: 0.3961,
  expired_bytes_ratio: 0.4,
  backlog_messages: 6017,
  backlog_live_messages: 5000,
  local_bytes: 768 * 1024 ** 2,
  remote_only_bytes: 2 * 1024 ** 3,
  collected_at: "2024-05-01T12:00:00Z",
  forecast_min_history_s: 1800,
  nodes: [
    {
      name: "node-1",
      health: "healthy",
      checked_at: "2024-05-01T12:00:00Z",
      last_seen_at: "2024-05-01T12:00:00Z",
      error: "",
      disk_used_bytes: 50,
      disk_capacity_bytes: 100,
      disk_used_ratio: 0.5,
      watermarks: wm,
      forecast_warning_at: null,
      forecast_history_s: 240,
      forecast_ready: false,
      local_bytes: 768 * 1024 ** 2,
      remote_only_bytes: 2 * 1024 ** 3,
    },
    {
      name: "node-2",
      health: "unknown",
      checked_at: null,
      last_seen_at: null,
      error: "",
      disk_used_bytes: null,
      disk_capacity_bytes: null,
      disk_used_ratio: null,
      watermarks: wm,
      forecast_warning_at: null,
      forecast_history_s: 0,
      forecast_ready: false,
      local_bytes: 0,
      remote_only_bytes: 0,
    },
  ],
};

const series = (name: string): MetricSeries => ({
  series: name,
  unit: name === "disk_used_ratio" ? "ratio" : "messages",
  range: "1h",
  step_s: 15,
  resolution: "raw",
  lines: [{ labels: { node: "node-1" }, points: [[Date.now() - 24_000, 1], [Date.now(), 2]] }],
  ...(name === "disk_used_ratio"
    ? { watermarks: wm, forecast: [], forecast_node: "node-1", forecast_history_s: 240, forecast_min_history_s: 1800, forecast_warning_at: null }
    : {}),
});

describe("overview", () => {
  const routes = (status: AlertStatus, alerts: Alert[]) => ({
    "GET /api/auth/me": viewer,
    "GET /api/health": health,
    "GET /api/alerts/status": status,
    "GET /api/alerts/": page(alerts),
    "GET /api/metrics/summary": summary,
    "GET /api/metrics/series": (url: string) => jsonResponse(series(new URL(url, "http://x").searchParams.get("series")!)),
  });

  it("is not ok while alerts fire, and marks the silenced ones", async () => {
    const until = "2030-01-01T13:00:00Z";
    mockFetch(
      routes({ status: "firing", firing: 2, silenced: 1, acknowledged: 0, critical: 0, pending: 0 }, [
        alert(1),
        alert(2, { silenced: true, silenced_until: until }),
      ]),
    );
    renderApp("/");
    await waitFor(() => expect(screen.getByTestId("health-status").textContent).toBe("! alerting: 2 firing (1 silenced)"));
    expect((await screen.findByTestId("overview-alert-silenced-2")).textContent).toContain("silenced until");
    expect(screen.queryByTestId("overview-alert-silenced-1")).toBeNull();
  });

  it("is ok with no alert firing; shows the server's figures and node health as they are", async () => {
    mockFetch(routes({ status: "ok", firing: 0, silenced: 0, acknowledged: 0, critical: 0, pending: 0 }, []));
    renderApp("/");
    await waitFor(() => expect(screen.getByTestId("health-status").textContent).toBe("✓ ok"));
    // The summed backlog (every subscription and shard), live beside it; the server's ratio, not 492/1242.
    expect((await screen.findByTestId("metric-backlog")).textContent).toContain("6,017 msgs (5,000 live)");
    expect(screen.getByTestId("metric-expired-ratio").textContent).toContain("39.6%");
    expect(screen.getByTestId("overview-node-health-node-1").textContent).toContain("healthy");
    expect(screen.getByTestId("overview-node-health-node-2").textContent).toContain("not checked yet");
    // Tiered storage: stored and its local / remote-only split exactly as the server sends them. The fixture's
    // figures deliberately do not add up (768 MiB + 2 GiB ≠ 1 GiB): the page shows each, it never sums or
    // derives one from the others (the server's three come from one collection and do add up).
    expect(screen.getByTestId("metric-stored-bytes").textContent).toContain("1 GiB");
    expect(screen.getByTestId("metric-local-bytes").textContent).toContain("768 MiB");
    expect(screen.getByTestId("metric-remote-only-bytes").textContent).toContain("2 GiB");
    // Rounded for reading, exact on hover: the server's bytes as they are.
    expect(screen.getByTestId("metric-local-bytes").getAttribute("title")).toBe("805,306,368 bytes");
    expect(screen.getByTestId("overview-node-tiers-node-1").textContent).toBe("768 MiB local · 2 GiB remote only");
    expect(screen.getByTestId("overview-node-tiers-node-2").textContent).toBe("0 B local");
    expect(screen.getByTestId("disk-forecast-pending-node-1").textContent).toBe(
      "No forecast yet: it needs 30m of disk history (4m so far).",
    );
    const chart = await screen.findByTestId("chart-disk");
    await waitFor(() =>
      expect(within(chart).getByTestId("chart-forecast-disk_used_ratio").textContent).toBe(
        "No forecast yet: it needs 30m of disk history of node-1 (4m so far).",
      ),
    );
  });
});

describe("overview charts' readouts", () => {
  const now = Date.now();
  // The charts' lines end at their latest samples; the readouts beside the charts that have a card are the
  // card's own summary field (issue 16: "latest 48 %" beside a 97 % card, from a partial step average).
  const line = (labels: Record<string, string>, ...values: number[]) => ({
    labels,
    points: values.map((v, i) => [now - (values.length - 1 - i) * 12_000, v] as [number, number]),
  });
  const charts: Record<string, MetricSeries> = {
    expired_ratio: { series: "expired_ratio", unit: "ratio", range: "1h", step_s: 12, resolution: "raw", lines: [line({ namespace: "orders" }, 0, 0.45), line({ namespace: "payments" }, 0.2, 0.2)] },
    backlog_messages: { series: "backlog_messages", unit: "messages", range: "1h", step_s: 12, resolution: "raw", lines: [line({ namespace: "orders" }, 3000, 3468), line({ namespace: "payments" }, 2549)] },
    celery_queue_depth: { series: "celery_queue_depth", unit: "messages", range: "1h", step_s: 12, resolution: "raw", lines: [line({ queue: "celery" }, 3, 4), line({ queue: "lifecycle.node-1" }, 9, 7)] },
    delete_queue_length: { series: "delete_queue_length", unit: "count", range: "1h", step_s: 12, resolution: "raw", lines: [line({ node: "node-1" }, 1, 2)] },
    disk_used_ratio: { series: "disk_used_ratio", unit: "ratio", range: "1h", step_s: 12, resolution: "raw", lines: [line({ node: "node-1" }, 0.46, 0.47)], watermarks: wm, forecast: [] },
  };
  const routes = (s: MetricsSummary | (() => Response)) => ({
    "GET /api/auth/me": viewer,
    "GET /api/health": health,
    "GET /api/alerts/status": { status: "ok", firing: 0, silenced: 0, acknowledged: 0, critical: 0, pending: 0 },
    "GET /api/alerts/": page([]),
    "GET /api/metrics/summary": s,
    "GET /api/metrics/series": (url: string) => jsonResponse(charts[new URL(url, "http://x").searchParams.get("series")!]),
  });

  it("shows the card's figure beside a chart that has a card, and names the highest line with its own value", async () => {
    mockFetch(routes(summary));
    renderApp("/?range=1h");
    expect((await screen.findByTestId("metric-expired-ratio")).textContent).toContain("39.6%");
    const expired = await screen.findByTestId("chart-latest-expired_ratio");
    await waitFor(() => expect(expired.textContent).toBe("latest 39.6% (highest: orders 45%)"));
    expect(expired.getAttribute("data-source")).toBe("summary");
    expect(screen.getByTestId("metric-backlog").textContent).toContain("6,017 msgs");
    expect((await screen.findByTestId("chart-latest-backlog_messages")).textContent).toBe("latest 6,017 msgs (highest: orders 3,468 msgs)");
    // Disk: the fullest node's figure from the same summary as its disk card (50%), not the chart's 47%.
    expect((await screen.findByTestId("chart-latest-disk_used_ratio")).textContent).toBe("latest 50%");
    // No card for these: the highest line's latest sample (the chart's last point).
    const queues = await screen.findByTestId("chart-latest-celery_queue_depth");
    expect(queues.textContent).toBe("latest 7 msgs (highest: lifecycle.node-1)");
    expect(queues.getAttribute("data-source")).toBe("series");
    expect((await screen.findByTestId("chart-latest-delete_queue_length")).textContent).toBe("latest 2");
  });

  it("falls back to the charts' latest samples when the summary cannot be loaded", async () => {
    mockFetch(routes(() => jsonResponse({ detail: "boom" }, 500)));
    renderApp("/?range=1h");
    const expired = await screen.findByTestId("chart-latest-expired_ratio");
    expect(expired.textContent).toBe("latest 45% (highest: orders)");
    expect(expired.getAttribute("data-source")).toBe("series");
  });
});

describe("namespace page", () => {
  const ns: Namespace = {
    name: "orders",
    shards: 2,
    node: "node-1",
    placement: [
      { shard: 0, node: "node-1" },
      { shard: 1, node: "node-1" },
    ],
    policy_overrides: {},
    created_at: "2024-05-01T12:00:00Z",
    updated_at: "2024-05-01T12:00:00Z",
    sync_state: "synced",
    sync_error: "",
  };
  const figures: NamespaceSummary = {
    name: "orders",
    stored_bytes: 4096,
    stored_records: 1242,
    live_records: 750,
    expired_records: 492,
    expired_bytes: 1500,
    expired_ratio: 0.3961,
    expired_bytes_ratio: 0.37,
    segment_count: 7,
    local_bytes: 3072,
    remote_only_bytes: 2048,
    backlog_messages: 6017,
    backlog_live_messages: 5000,
    collected_at: "2024-05-01T12:00:00Z",
    last_scan_at: "2024-05-01T11:00:00Z",
    last_scan_run: 41,
    last_compaction_at: null,
    last_compaction_run: null,
    shards: [
      // Deliberately not consistent with the counts: the page must show the node's ratio, not divide.
      { shard: 0, log_start_offset: 0, end_offset: 800, record_count: 800, live_count: 500, size_bytes: 2048, segment_count: 4, expired_records: 300, expired_bytes: 700, expired_ratio: 0.38, expired_bytes_ratio: 0.34, backlog_messages: 3468, backlog_live_messages: 3000, backlog_bytes: 9000, local_bytes: 1024, remote_only_bytes: 2048, updated_at: "2024-05-01T12:00:00Z", collected_at: "2024-05-01T12:00:00Z" },
      { shard: 1, log_start_offset: 0, end_offset: 442, record_count: 442, live_count: 250, size_bytes: 2048, segment_count: 3, expired_records: 192, expired_bytes: 800, expired_ratio: 0.4344, expired_bytes_ratio: 0.39, backlog_messages: 2549, backlog_live_messages: 2000, backlog_bytes: 7000, local_bytes: 2048, remote_only_bytes: 0, updated_at: "2024-05-01T12:00:00Z", collected_at: "2024-05-01T12:00:00Z" },
    ],
  };

  it("renders the summary and the shards' figures as the server sends them", async () => {
    mockFetch({ "GET /api/auth/me": viewer, "GET /api/namespaces/orders/": ns, "GET /api/namespaces/orders/summary": figures });
    renderApp("/namespaces/orders");
    expect((await screen.findByTestId("summary-records")).textContent).toContain("1,242");
    expect(screen.getByTestId("summary-live-records").textContent).toContain("750");
    expect(screen.getByTestId("summary-expired-ratio").textContent).toContain("39.6% (492)");
    expect(screen.getByTestId("summary-backlog").textContent).toContain("6,017 msgs (5,000 live)");
    expect(screen.getByTestId("shard-expired-0").textContent).toContain("38%");
    expect(screen.getByTestId("shard-expired-1").textContent).toContain("43.4%");
    expect(screen.getByTestId("shard-backlog-0").textContent).toBe("3,468");
    expect(screen.getByTestId("summary-collected-at").textContent).toMatch(/as of/);
    // The last scan links to the run that did the work (a node-wide sweep's row too); no compaction, no link.
    expect(screen.getByTestId("summary-last-scan-run").getAttribute("href")).toBe("/tasks?run=41");
    expect(screen.queryByTestId("summary-last-compaction-run")).toBeNull();
    // Stored, local and remote only as sent (4 KiB ≠ 3 KiB + 2 KiB on purpose: nothing is added up here).
    expect(screen.getByTestId("summary-stored-bytes").textContent).toContain("4 KiB");
    expect(screen.getByTestId("summary-local-bytes").textContent).toContain("3 KiB");
    expect(screen.getByTestId("summary-remote-only-bytes").textContent).toContain("2 KiB");
    expect(screen.getByTestId("summary-stored-bytes").getAttribute("title")).toBe("4,096 bytes");
    expect(screen.getByTestId("shard-size-0").textContent).toBe("2 KiB");
    expect(screen.getByTestId("shard-tiers-0").textContent).toBe("1 KiB local · 2 KiB remote only");
    expect(screen.getByTestId("shard-tiers-1").textContent).toBe("2 KiB local");
  });

  it("shows no backlog before a collection reported it", async () => {
    const early = { ...figures, backlog_messages: null, backlog_live_messages: null, collected_at: null };
    early.shards = figures.shards.map((s) => ({ ...s, collected_at: null }));
    mockFetch({ "GET /api/auth/me": viewer, "GET /api/namespaces/orders/": ns, "GET /api/namespaces/orders/summary": early });
    renderApp("/namespaces/orders");
    expect((await screen.findByTestId("summary-backlog")).textContent).toContain("—");
    expect(screen.getByTestId("shard-backlog-0").textContent).toBe("—");
  });
});

describe("nodes page", () => {
  const row = (name: string, extra: Partial<StorageNode> = {}): StorageNode => ({
    name,
    url: `http://${name}:7070`,
    has_token: true,
    healthy: false,
    last_seen_at: null,
    last_error: "",
    policy_overrides: {},
    policy_sync_state: "synced",
    policy_sync_error: "",
    policy_version: 1,
    policy_synced_at: "2024-05-01T12:00:00Z",
    created_at: "2024-05-01T12:00:00Z",
    ...extra,
  });

  it("takes health and last seen from the same collection as the Overview", async () => {
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/nodes/": [row("node-1"), row("node-2")],
      "GET /api/metrics/summary": summary,
    });
    renderApp("/nodes");
    await waitFor(() => expect(screen.getByTestId("node-health-node-1").textContent).toContain("healthy"));
    expect(screen.getByTestId("node-health-node-1").textContent).not.toContain("unhealthy");
    expect(screen.getByTestId("node-last-seen-node-1").textContent).not.toContain("never");
    // Never looked at: not checked yet, never "unhealthy, last seen never".
    expect(screen.getByTestId("node-health-node-2").textContent).toContain("not checked yet");
    expect(screen.getByTestId("node-last-seen-node-2").textContent).toBe("not checked yet");
    expect(screen.getByTestId("node-tiers-node-1").textContent).toBe("768 MiB local · 2 GiB remote only");
  });
});

describe("messages page", () => {
  it("labels each record with its effective expiry", async () => {
    const shown = (text: string) => ({ text, hex: null, size: text.length, truncated: false, tombstone: false });
    const now = Date.now();
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([{ name: "orders", shards: 1, node: "node-1", created_at: "2024-05-01T12:00:00Z", sync_state: "synced", sync_error: "" }]),
      "GET /api/namespaces/orders/messages": () =>
        jsonResponse({
          records: [
            // Its own TTL (5 h) is later than the namespace's (1 h): it expires with the namespace's.
            { shard: 0, offset: 0, timestamp: now, expire_at: now + 5 * 3_600_000, effective_expires_at: now + 3_600_000, key: null, value: shown("a"), tags: [], headers: {} },
            { shard: 0, offset: 1, timestamp: now, expire_at: null, effective_expires_at: null, key: null, value: shown("b"), tags: [], headers: {} },
          ],
          next_offset: 2,
        }),
    });
    renderApp("/messages?namespace=orders&shard=0&offset=0");
    expect((await screen.findByTestId("message-expiry-0")).textContent).toMatch(/^expires in (59m|1h).*\(namespace TTL\)$/);
    expect(screen.getByTestId("message-expiry-1").textContent).toBe("no expiry");
  });
});
