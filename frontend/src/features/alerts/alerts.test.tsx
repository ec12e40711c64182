// @vitest-environment jsdom
// The Alerts page's controls (issue 16): viewers read everything without an error, operators turn rules
// off and on and test channels, and the history reads true (only alerts that fired show fired → resolved).
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { Alert, AlertChannel, AlertRule, User } from "../../api/types";
import { alertMetric, alertTimeline } from "./alerts";
import { body, callsTo, clearCookies, jsonResponse, mockFetch, renderApp } from "../../test/utils";

const admin: User = { username: "ada", role: "admin" };
const operator: User = { username: "olga", role: "operator" };
const viewer: User = { username: "vic", role: "viewer" };

const page = <T,>(results: T[]) => ({ next: null, previous: null, results });

const alert = (id: number, extra: Partial<Alert> = {}): Alert => ({
  id,
  rule: 4,
  rule_name: "Expired ratio above 20 %",
  metric: "expired_ratio",
  severity: "warning",
  state: "firing",
  scope: "namespace=orders",
  labels: { namespace: "orders" },
  value: 0.31,
  threshold: 0.2,
  started_at: "2030-01-01T00:00:00Z",
  fired_at: "2030-01-01T00:15:00Z",
  resolved_at: null,
  acknowledged_by: null,
  acknowledged_at: null,
  silenced_until: null,
  silenced: false,
  summary: "expired_ratio 0.31 > 0.2",
  ...extra,
});

const rule = (id: number, extra: Partial<AlertRule> = {}): AlertRule => ({
  id,
  name: "Expired ratio above 20 %",
  metric: "expired_ratio",
  scope_type: "all",
  scope: "",
  comparator: ">",
  threshold: 0.2,
  threshold_policy: "",
  for_s: 900,
  severity: "warning",
  channels: [2],
  enabled: true,
  description: "",
  builtin: true,
  created_at: "2030-01-01T00:00:00Z",
  updated_at: "2030-01-01T00:00:00Z",
  ...extra,
});

// What the server answers a non-admin: the target shortened.
const hook: AlertChannel = { id: 2, name: "pager", kind: "webhook", target: "https://hooks.example.com/…", enabled: true, has_secret: true, target_redacted: true, created_at: "2030-01-01T00:00:00Z" };
const mail: AlertChannel = { id: 3, name: "ops mail", kind: "email", target: "…@example.com", enabled: false, has_secret: false, target_redacted: true, created_at: "2030-01-01T00:00:00Z" };

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("alerts page for viewers", () => {
  it("shows alerts, rules and channels read-only, with no error and no write buttons", async () => {
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/alerts/": page([alert(1)]),
      "GET /api/alert-rules/": [rule(4), rule(5, { name: "TTL scan longer than 10 minutes", metric: "scan_duration_seconds", threshold: 600, for_s: 0, enabled: false, channels: [] })],
      "GET /api/alert-channels/": [hook, mail],
    });
    renderApp("/alerts");
    expect((await screen.findByTestId("alert-row-1")).textContent).toContain("31% vs 20%");
    const disabled = await screen.findByTestId("rule-row-5");
    expect(within(disabled).getByTestId("rule-enabled-5").textContent).toContain("disabled");
    expect(screen.getByTestId("rule-row-4").textContent).toContain("pager"); // channel names resolve
    expect((await screen.findByTestId("channel-target-2")).textContent).toContain("https://hooks.example.com/…");
    expect(screen.getByTestId("channel-target-2").textContent).toContain("only admins see the whole URL");
    expect(screen.getByTestId("rules-role-note").textContent).toMatch(/Read-only/);
    // No error banner anywhere, and nothing to press.
    expect(screen.queryByText(/Could not load/)).toBeNull();
    expect(screen.queryAllByRole("alert")).toEqual([]);
    for (const id of ["alert-ack-1", "rule-new", "rule-toggle-4", "rule-edit-4", "rule-delete-4", "channel-test-2", "channel-edit-2", "channel-form"]) {
      expect(screen.queryByTestId(id)).toBeNull();
    }
  });

  it("is not an error when an older server keeps channels to admins", async () => {
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [rule(4)],
      "GET /api/alert-channels/": () => jsonResponse({ detail: "You do not have permission to perform this action." }, 403),
    });
    renderApp("/alerts");
    expect(await screen.findByTestId("channels-admin-only")).toBeTruthy();
    expect(await screen.findByTestId("rule-row-4")).toBeTruthy();
    expect(screen.queryByText(/Could not load/)).toBeNull();
  });
});

describe("alerts page for operators", () => {
  it("turns a built-in rule off and on", async () => {
    let enabled = true;
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": () => jsonResponse([rule(4, { enabled })]),
      "GET /api/alert-channels/": [hook],
      "POST /api/alert-rules/4/enabled": (_url: string, init: RequestInit) => {
        enabled = JSON.parse(String(init.body)).enabled;
        return jsonResponse(rule(4, { enabled }));
      },
    });
    renderApp("/alerts");
    const toggle = await screen.findByTestId("rule-toggle-4");
    expect(toggle.textContent).toBe("Disable");
    expect(screen.queryByTestId("rule-edit-4")).toBeNull(); // editing stays with admins
    expect(screen.getByTestId("rules-role-note").textContent).toMatch(/Operators turn rules off and on/);
    fireEvent.click(toggle);
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/alert-rules/4/enabled").length).toBe(1));
    expect(body(callsTo(fetch, "POST", "/api/alert-rules/4/enabled")[0]!)).toEqual({ enabled: false });
    await waitFor(() => expect(screen.getByTestId("rule-enabled-4").textContent).toContain("disabled"));
    expect(screen.getByTestId("rule-toggle-4").textContent).toBe("Enable");
    fireEvent.click(screen.getByTestId("rule-toggle-4"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/alert-rules/4/enabled").length).toBe(2));
    expect(body(callsTo(fetch, "POST", "/api/alert-rules/4/enabled")[1]!)).toEqual({ enabled: true });
    await waitFor(() => expect(screen.getByTestId("rule-enabled-4").textContent).toBe("yes"));
  });

  it("shows why a toggle was refused", async () => {
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [rule(4)],
      "GET /api/alert-channels/": [],
      "POST /api/alert-rules/4/enabled": () => jsonResponse({ detail: "You do not have permission to perform this action." }, 403),
    });
    renderApp("/alerts");
    fireEvent.click(await screen.findByTestId("rule-toggle-4"));
    expect((await screen.findByTestId("rule-toggle-error")).textContent).toMatch(/permission/);
  });

  it("sends a test through each channel and shows the outcome", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [rule(4)],
      "GET /api/alert-channels/": [hook, mail],
      "POST /api/alert-channels/2/test": () => jsonResponse({ delivered: false, error: "webhook answered HTTP 500" }),
      "POST /api/alert-channels/3/test": () => jsonResponse({ delivered: true, error: "" }),
    });
    renderApp("/alerts");
    fireEvent.click(await screen.findByTestId("channel-test-2"));
    const failed = await screen.findByTestId("channel-test-result-2");
    expect(failed.textContent).toContain("not delivered");
    expect(failed.textContent).toContain("webhook answered HTTP 500");
    fireEvent.click(screen.getByTestId("channel-test-3")); // a disabled channel can be tested before it is turned on
    expect((await screen.findByTestId("channel-test-result-3")).textContent).toContain("delivered");
    expect(screen.getByTestId("channel-test-result-3").textContent).not.toContain("not delivered");
    expect(callsTo(fetch, "POST", "/api/alert-channels/2/test").length).toBe(1);
    expect(callsTo(fetch, "POST", "/api/alert-channels/3/test").length).toBe(1);
    expect(screen.queryByTestId("channel-form")).toBeNull(); // channel edits stay with admins
  });
});

describe("alerts page for admins", () => {
  it("has every control, and the full channel target", async () => {
    const full: AlertChannel = { ...hook, target: "https://hooks.example.com/services/T0KEN", target_redacted: false };
    mockFetch({
      "GET /api/auth/me": admin,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [rule(4)],
      "GET /api/alert-channels/": [full],
    });
    renderApp("/alerts");
    for (const id of ["rule-toggle-4", "rule-edit-4", "rule-delete-4", "channel-test-2", "channel-edit-2"]) {
      expect(await screen.findByTestId(id)).toBeTruthy();
    }
    expect(screen.getByTestId("channel-target-2").textContent).toBe("https://hooks.example.com/services/T0KEN");
    fireEvent.click(screen.getByTestId("rule-delete-4"));
    expect(screen.getByTestId("rule-row-4").textContent).toMatch(/not re-created; its alert history stays/);
  });

  it("adds an Alertmanager channel (issue 18)", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": admin,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [],
      "GET /api/alert-channels/": [],
      "POST /api/alert-channels/": () => jsonResponse({ id: 5 }, 201),
    });
    renderApp("/alerts");
    fireEvent.change(await screen.findByTestId("channel-name"), { target: { value: "am" } });
    fireEvent.change(screen.getByTestId("channel-kind"), { target: { value: "alertmanager" } });
    expect(screen.getByLabelText("Alertmanager URL")).toBe(screen.getByTestId("channel-target"));
    fireEvent.change(screen.getByTestId("channel-target"), { target: { value: "alertmanager:9093" } });
    fireEvent.click(screen.getByTestId("channel-save"));
    expect((await screen.findByTestId("channel-error-target")).textContent).toBe("Enter an http(s) URL.");
    fireEvent.change(screen.getByTestId("channel-target"), { target: { value: " http://alertmanager:9093 " } });
    fireEvent.click(screen.getByTestId("channel-save"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/alert-channels/").length).toBe(1));
    expect(body(callsTo(fetch, "POST", "/api/alert-channels/")[0]!)).toEqual({
      name: "am",
      kind: "alertmanager",
      target: "http://alertmanager:9093",
      enabled: true,
    });
  });
});

describe("channel secrets", () => {
  beforeEach(() => {
    clearCookies();
    resetCsrfToken();
    document.cookie = "csrftoken=t; path=/";
  });

  it("asks a new webhook for its signing secret and keeps a saved one when left empty", async () => {
    const saved: AlertChannel = { ...hook, target: "https://hooks.example.com/x", target_redacted: false };
    const fetch = mockFetch({
      "GET /api/auth/me": admin,
      "GET /api/alerts/": page([]),
      "GET /api/alert-rules/": [],
      "GET /api/alert-channels/": [saved],
      "POST /api/alert-channels/": () => jsonResponse({ id: 6 }, 201),
      "PATCH /api/alert-channels/2/": () => jsonResponse(saved),
    });
    renderApp("/alerts");
    fireEvent.change(await screen.findByTestId("channel-name"), { target: { value: "hook" } });
    expect(screen.queryByTestId("channel-secret")).toBeNull(); // email has no secret
    fireEvent.change(screen.getByTestId("channel-kind"), { target: { value: "webhook" } });
    fireEvent.change(screen.getByTestId("channel-target"), { target: { value: "https://hooks.example.com/y" } });
    fireEvent.click(screen.getByTestId("channel-save"));
    expect((await screen.findByTestId("channel-error-secret")).textContent).toBe("Enter a secret: it signs every delivery.");
    expect(callsTo(fetch, "POST", "/api/alert-channels/").length).toBe(0);
    fireEvent.change(screen.getByTestId("channel-secret"), { target: { value: "s3cret" } });
    fireEvent.click(screen.getByTestId("channel-save"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/alert-channels/").length).toBe(1));
    expect(body(callsTo(fetch, "POST", "/api/alert-channels/")[0]!)).toMatchObject({ kind: "webhook", secret: "s3cret" });

    fireEvent.click(await screen.findByTestId("channel-edit-2"));
    expect((screen.getByTestId("channel-secret") as HTMLInputElement).placeholder).toBe("saved: leave empty to keep");
    fireEvent.click(screen.getByTestId("channel-save"));
    const edits = await waitFor(() => {
      const calls = [...callsTo(fetch, "PATCH", "/api/alert-channels/2/"), ...callsTo(fetch, "PUT", "/api/alert-channels/2/")];
      expect(calls.length).toBe(1);
      return calls;
    });
    expect(body(edits[0]!)).not.toHaveProperty("secret"); // the saved secret stays
  });
});

describe("alert history", () => {
  it("shows fired → resolved only for alerts that fired, and keeps a deleted rule's alerts readable", async () => {
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/alerts/": page([
        alert(7, { state: "resolved", rule: null, resolved_at: "2030-01-01T01:00:00Z" }),
        // stored by an older server: pending, then cleared, never fired
        alert(8, { state: "resolved", fired_at: null, resolved_at: "2030-01-01T00:05:00Z", metric: undefined }),
      ]),
      "GET /api/alert-rules/": [rule(4)],
      "GET /api/alert-channels/": [],
    });
    renderApp("/alerts?state=resolved");
    const fired = await screen.findByTestId("alert-when-7");
    expect(fired.textContent).toContain("→");
    expect(screen.getByTestId("alert-rule-deleted-7").textContent).toContain("rule deleted");
    expect(screen.getByTestId("alert-row-7").textContent).toContain("31% vs 20%"); // its own metric copy
    const cleared = screen.getByTestId("alert-when-8");
    expect(cleared.textContent).not.toContain("→");
    expect(cleared.textContent).toContain("never fired");
    expect(screen.queryByTestId("alert-rule-deleted-8")).toBeNull();
    await waitFor(() => expect(screen.getByTestId("alert-row-8").textContent).toContain("31% vs 20%")); // via its rule
  });

  it("helpers: the metric and the timeline", () => {
    expect(alertMetric({ metric: "disk_used_ratio", rule: 4 }, [{ id: 4, metric: "expired_ratio" }])).toBe("disk_used_ratio");
    // An alert older than its metric column has an empty one.
    expect(alertMetric({ metric: "", rule: 4 }, [{ id: 4, metric: "expired_ratio" }])).toBe("expired_ratio");
    expect(alertMetric({ metric: "", rule: null }, [{ id: 4, metric: "expired_ratio" }])).toBeUndefined();
    expect(alertTimeline({ fired_at: "2030-01-01T00:15:00Z" })).toBe("fired");
    expect(alertTimeline({ fired_at: null })).toBe("never-fired");
  });
});
