// @vitest-environment jsdom
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../api/client";
import type { Health, NamespaceListRow, User } from "../api/types";
import { namespaceRow } from "../test/fixtures";
import { clearCookies, jsonResponse, mockFetch, renderApp } from "../test/utils";

import { NAME_HINT } from "../features/namespaces/names";
const operator: User = { username: "olga", role: "operator" };
const admin: User = { username: "ada", role: "admin" };
const viewer: User = { username: "vic", role: "viewer" };

const health: Health = {
  status: "degraded",
  checked_at: new Date().toISOString(),
  components: {
    database: { ok: true, detail: "sqlite ok", last_heartbeat: null },
    broker: { ok: true, detail: "redis ok", last_heartbeat: null },
    node: { ok: true, detail: "node-1 reachable", last_heartbeat: null },
    worker: { ok: true, detail: "1 worker", last_heartbeat: null },
    beat: { ok: false, detail: "no heartbeat for 5m", last_heartbeat: "2024-05-01T12:00:00Z" },
    spark: { ok: true, detail: "local[*] 3.5.1", last_heartbeat: null },
  },
};

const ns = (name: string, extra: Partial<NamespaceListRow> = {}): NamespaceListRow => namespaceRow(name, { shards: 4, ...extra });

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("auth", () => {
  it("sends an anonymous user to /login and logs in", async () => {
    let loggedIn = false;
    const fetch = mockFetch({
      "GET /api/auth/me": () => (loggedIn ? jsonResponse(operator) : jsonResponse({ detail: "Not logged in." }, 403)),
      "GET /api/auth/csrf": { csrftoken: "tok" },
      "POST /api/auth/login": () => {
        loggedIn = true;
        return jsonResponse(operator);
      },
      "GET /api/health": health,
      "GET /api/namespaces/": { next: null, previous: null, results: [ns("orders")] },
    });
    const { router } = renderApp("/namespaces");
    const username = await screen.findByTestId("login-username");
    expect(router.state.location.pathname).toBe("/login");
    expect(router.state.location.search).toBe("?next=%2Fnamespaces");
    // Public health shows on the login page.
    expect((await screen.findByTestId("login-health-status")).textContent).toContain("degraded");

    fireEvent.change(username, { target: { value: "olga" } });
    fireEvent.change(screen.getByTestId("login-password"), { target: { value: "secret" } });
    fireEvent.click(screen.getByTestId("login-submit"));

    expect(await screen.findByTestId("namespace-row-orders")).toBeTruthy();
    expect(router.state.location.pathname).toBe("/namespaces");
    expect(screen.getByTestId("current-user").textContent).toContain("olga");
    const calls = fetch.mock.calls.map((c) => `${c[1]?.method ?? "GET"} ${c[0]}`);
    const login = calls.indexOf("POST /api/auth/login");
    expect(login).toBeGreaterThan(0);
    expect(calls[login - 1]).toBe("GET /api/auth/csrf");
    const post = fetch.mock.calls[login]!;
    expect(JSON.parse(String(post[1]!.body))).toEqual({ username: "olga", password: "secret" });
  });

  it("shows the server's message on a failed login", async () => {
    mockFetch({
      "GET /api/auth/me": () => jsonResponse({ detail: "Not logged in." }, 403),
      "GET /api/auth/csrf": { csrftoken: "tok" },
      "POST /api/auth/login": () => jsonResponse({ detail: "Invalid username or password." }, 400),
      "GET /api/health": health,
    });
    renderApp("/login");
    fireEvent.change(await screen.findByTestId("login-username"), { target: { value: "x" } });
    fireEvent.change(screen.getByTestId("login-password"), { target: { value: "y" } });
    fireEvent.click(screen.getByTestId("login-submit"));
    expect((await screen.findByTestId("login-error")).textContent).toBe("Invalid username or password.");
  });

  it("asks for both fields before posting", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": () => jsonResponse({ detail: "Not logged in." }, 403),
      "GET /api/health": health,
    });
    renderApp("/login");
    fireEvent.click(await screen.findByTestId("login-submit"));
    expect((await screen.findByTestId("login-error")).textContent).toMatch(/username and password/);
    expect(fetch.mock.calls.some((c) => c[1]?.method === "POST")).toBe(false);
  });

  it("shows an error with retry when the session check fails", async () => {
    mockFetch({
      "GET /api/auth/me": () => new Response("bad gateway", { status: 502 }),
    });
    renderApp("/");
    // useMe retries once (1 s) before giving up.
    expect(await screen.findByText("Could not check your session", {}, { timeout: 4000 })).toBeTruthy();
    expect(screen.getByRole("button", { name: "Retry" })).toBeTruthy();
  });
});

describe("overview", () => {
  it("renders one card per component with OK/FAIL state", async () => {
    mockFetch({ "GET /api/auth/me": operator, "GET /api/health": () => jsonResponse(health, 503) });
    renderApp("/");
    const status = await screen.findByTestId("health-status");
    expect(status.textContent).toContain("degraded");
    expect(screen.getByTestId("health-database").getAttribute("data-ok")).toBe("true");
    const beat = screen.getByTestId("health-beat");
    expect(beat.getAttribute("data-ok")).toBe("false");
    expect(beat.textContent).toContain("FAIL");
    expect(beat.textContent).toContain("no heartbeat for 5m");
    expect(beat.textContent).toMatch(/Last heartbeat: 2024-05-0\d/);
    // Components without a heartbeat do not show one.
    expect(screen.getByTestId("health-database").textContent).not.toContain("Last heartbeat");
    // Unknown components render too.
    const spark = screen.getByTestId("health-spark");
    expect(spark.getAttribute("data-ok")).toBe("true");
    expect(spark.textContent).toContain("3.5.1");
    // Known components come first, in a fixed order.
    const ids = screen.getAllByRole("article").map((a) => a.getAttribute("data-testid"));
    expect(ids).toEqual(["health-database", "health-broker", "health-node", "health-worker", "health-beat", "health-spark"]);
  });

  it("says ok when everything is ok", async () => {
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/health": { ...health, status: "ok", components: { database: { ok: true, detail: "fine" } } },
    });
    renderApp("/");
    expect((await screen.findByTestId("health-status")).textContent).toContain("ok");
  });

  it("explains when health cannot be loaded", async () => {
    mockFetch({ "GET /api/auth/me": operator, "GET /api/health": () => jsonResponse({ detail: "nope" }, 500) });
    renderApp("/");
    expect(await screen.findByText("Could not load system health")).toBeTruthy();
    expect(screen.getByText("nope")).toBeTruthy();
  });
});

describe("namespaces", () => {
  it("lists namespaces across pages", async () => {
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": (url: string) =>
        url.includes("cursor")
          ? jsonResponse({ next: null, previous: null, results: [ns("payments", { node: null, sync_state: "failed", sync_error: "node unreachable" })] })
          : jsonResponse({ next: "http://testserver/api/namespaces/?cursor=abc", previous: null, results: [ns("orders")] }),
    });
    renderApp("/namespaces");
    const row = await screen.findByTestId("namespace-row-payments");
    expect(row.textContent).toContain("failed");
    expect(row.textContent).toContain("node unreachable");
    expect(row.textContent).toContain("no node");
    expect(screen.getByTestId("namespace-row-orders").textContent).toContain("node-1");
  });

  it("hides the create form from operators too (creating is an admin action)", async () => {
    mockFetch({ "GET /api/auth/me": operator, "GET /api/namespaces/": { next: null, previous: null, results: [] } });
    renderApp("/namespaces");
    expect(await screen.findByText("No namespaces yet")).toBeTruthy();
    expect(screen.queryByTestId("create-namespace-name")).toBeNull();
  });

  it("hides the create form from viewers", async () => {
    mockFetch({ "GET /api/auth/me": viewer, "GET /api/namespaces/": { next: null, previous: null, results: [] } });
    renderApp("/namespaces");
    expect(await screen.findByText("No namespaces yet")).toBeTruthy();
    expect(screen.getByText(/Ask an admin/)).toBeTruthy();
    expect(screen.queryByTestId("create-namespace-name")).toBeNull();
  });

  it("lets an admin create a namespace and shows server field errors inline", async () => {
    let attempt = 0;
    const fetch = mockFetch({
      "GET /api/auth/me": admin,
      "GET /api/namespaces/": () =>
        jsonResponse({ next: null, previous: null, results: attempt >= 2 ? [ns("orders"), ns("billing", { shards: 3 })] : [ns("orders")] }),
      "POST /api/namespaces/": () => {
        attempt += 1;
        return attempt === 1
          ? jsonResponse({ name: ["namespace with this name already exists."] }, 400)
          : jsonResponse(ns("billing", { shards: 3, sync_state: "pending" }), 201);
      },
    });
    renderApp("/namespaces");
    const name = await screen.findByTestId("create-namespace-name");
    fireEvent.change(name, { target: { value: "orders" } });
    fireEvent.click(screen.getByTestId("create-namespace-submit"));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(screen.getByText("namespace with this name already exists.")).toBeTruthy();

    fireEvent.change(name, { target: { value: "billing" } });
    fireEvent.change(screen.getByTestId("create-namespace-shards"), { target: { value: "3" } });
    fireEvent.click(screen.getByTestId("create-namespace-submit"));
    const row = await screen.findByTestId("namespace-row-billing");
    expect(within(row).getByText("3")).toBeTruthy();
    expect(screen.getByTestId("create-namespace-success").textContent).toContain("billing");
    const post = fetch.mock.calls.filter((c) => c[1]?.method === "POST").at(-1)!;
    expect(JSON.parse(String(post[1]!.body))).toEqual({ name: "billing", shards: 3 });
    expect(new Headers(post[1]!.headers).get("X-CSRFToken")).toBe("tok");
  });

  it("creates a namespace with an infinite retention (null) and a TTL", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": admin,
      "GET /api/namespaces/": { next: null, previous: null, results: [] },
      "POST /api/namespaces/": () => jsonResponse(ns("archive"), 201),
    });
    renderApp("/namespaces");
    fireEvent.change(await screen.findByTestId("create-namespace-name"), { target: { value: "archive" } });
    fireEvent.change(screen.getByTestId("create-namespace-retention"), { target: { value: "infinite" } });
    fireEvent.change(screen.getByTestId("create-namespace-ttl"), { target: { value: "7d" } });
    fireEvent.click(screen.getByTestId("create-namespace-submit"));
    await waitFor(() => expect(fetch.mock.calls.filter((c) => c[1]?.method === "POST").length).toBe(1));
    const post = fetch.mock.calls.find((c) => c[1]?.method === "POST")!;
    expect(JSON.parse(String(post[1]!.body)).policy).toEqual({ retention_ms: null, ttl_ms: 7 * 86_400_000 });
  });

  it("validates before posting", async () => {
    const fetch = mockFetch({ "GET /api/auth/me": admin, "GET /api/namespaces/": { next: null, previous: null, results: [] } });
    renderApp("/namespaces");
    expect(await screen.findByText(NAME_HINT)).toBeTruthy(); // the engine's rule, not words of its own
    fireEvent.change(await screen.findByTestId("create-namespace-name"), { target: { value: "bad name!" } });
    fireEvent.change(screen.getByTestId("create-namespace-shards"), { target: { value: "0" } });
    fireEvent.click(screen.getByTestId("create-namespace-submit"));
    expect(await screen.findByText(/letters, digits/)).toBeTruthy();
    expect(screen.getByText(/whole number from 1 to 1024/)).toBeTruthy();
    expect(fetch.mock.calls.some((c) => c[1]?.method === "POST")).toBe(false);
  });

  it("shows a retryable error when the list fails", async () => {
    mockFetch({ "GET /api/auth/me": operator, "GET /api/namespaces/": () => jsonResponse({ detail: "database is locked" }, 500) });
    renderApp("/namespaces");
    expect(await screen.findByText("Could not load namespaces")).toBeTruthy();
    expect(screen.getByText("database is locked")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Retry" })).toBeTruthy();
  });
});

describe("shell", () => {
  it("has a nav with the current page marked and a 404 page", async () => {
    mockFetch({ "GET /api/auth/me": operator, "GET /api/health": health });
    renderApp("/nowhere");
    expect(await screen.findByText("Page not found")).toBeTruthy();
    const nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).getByRole("link", { name: "Overview" })).toBeTruthy();
    expect(within(nav).getByRole("link", { name: "Namespaces" })).toBeTruthy();
  });

  it("logs out and returns to the login page", async () => {
    let loggedIn = true;
    mockFetch({
      "GET /api/auth/me": () => (loggedIn ? jsonResponse(operator) : jsonResponse({ detail: "x" }, 403)),
      "GET /api/health": health,
      "POST /api/auth/logout": () => {
        loggedIn = false;
        return new Response(null, { status: 204 });
      },
    });
    const { router } = renderApp("/");
    fireEvent.click(await screen.findByTestId("logout"));
    await screen.findByTestId("login-username");
    expect(router.state.location.pathname).toBe("/login");
  });
});
