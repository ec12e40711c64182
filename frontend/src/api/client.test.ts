// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { clearCookies, jsonResponse, mockFetch } from "../test/utils";
import { answer, api, ApiError, confirmBody, errorMessage, flattenFieldErrors, getPage, listAll, resetCsrfToken, toApiPath } from "./client";
import { getHealth, getMe, login } from "./queries";
import type { NamespaceCreate } from "./types";

/** The request headers a mocked fetch call sent, by their usual names. */
function headersOf(init: RequestInit | undefined): Record<string, string | undefined> {
  const headers = new Headers(init?.headers);
  return new Proxy({}, { get: (_t, name: string) => headers.get(name) ?? undefined });
}

const createNamespace = (body: NamespaceCreate) => answer(api.POST("/api/namespaces/", { body }));

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
});

afterEach(() => {
  clearCookies();
});

describe("CSRF and credentials", () => {
  it("sends the csrftoken cookie as X-CSRFToken on unsafe requests", async () => {
    document.cookie = "csrftoken=cookie-token; path=/";
    const fetch = mockFetch({
      "POST /api/namespaces/": () =>
        jsonResponse({ name: "a", shards: 1, node: null, created_at: "2024-01-01T00:00:00Z", sync_state: "pending", sync_error: "" }, 201),
    });
    const ns = await createNamespace({ name: "a", shards: 1 });
    expect(ns.name).toBe("a");
    expect(fetch).toHaveBeenCalledTimes(1);
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("/api/namespaces/");
    expect(init?.credentials).toBe("same-origin");
    expect(headersOf(init)["X-CSRFToken"]).toBe("cookie-token");
    expect(headersOf(init)["Content-Type"]).toBe("application/json");
    expect(JSON.parse(String(init?.body))).toEqual({ name: "a", shards: 1 });
  });

  it("does not send a CSRF header on GET", async () => {
    document.cookie = "csrftoken=cookie-token; path=/";
    const fetch = mockFetch({ "GET /api/auth/me": { username: "u", role: "viewer" } });
    await getMe();
    expect(headersOf(fetch.mock.calls[0]![1])["X-CSRFToken"]).toBeUndefined();
    expect(fetch.mock.calls[0]![1]?.credentials).toBe("same-origin");
  });

  it("fetches a token from /api/auth/csrf when there is no cookie", async () => {
    const fetch = mockFetch({
      "GET /api/auth/csrf": { csrftoken: "body-token" },
      "POST /api/namespaces/": () => jsonResponse({ name: "b" }, 201),
    });
    await createNamespace({ name: "b", shards: 1 });
    expect(fetch.mock.calls.map((c) => c[0])).toEqual(["/api/auth/csrf", "/api/namespaces/"]);
    expect(headersOf(fetch.mock.calls[1]![1])["X-CSRFToken"]).toBe("body-token");
  });

  it("login asks for a fresh token first, then posts the credentials", async () => {
    const fetch = mockFetch({
      "GET /api/auth/csrf": () => {
        document.cookie = "csrftoken=fresh; path=/";
        return jsonResponse({ csrftoken: "fresh" });
      },
      "POST /api/auth/login": { username: "alice", role: "operator" },
    });
    const user = await login({ username: "alice", password: "pw" });
    expect(user).toEqual({ username: "alice", role: "operator" });
    expect(fetch.mock.calls.map((c) => `${c[1]?.method ?? "GET"} ${c[0]}`)).toEqual([
      "GET /api/auth/csrf",
      "POST /api/auth/login",
    ]);
    expect(headersOf(fetch.mock.calls[1]![1])["X-CSRFToken"]).toBe("fresh");
  });

  it("retries once with a new token after a CSRF failure", async () => {
    document.cookie = "csrftoken=stale; path=/";
    let posts = 0;
    const fetch = mockFetch({
      "GET /api/auth/csrf": () => {
        document.cookie = "csrftoken=renewed; path=/";
        return jsonResponse({ csrftoken: "renewed" });
      },
      "POST /api/namespaces/": () => {
        posts += 1;
        return posts === 1
          ? jsonResponse({ detail: "CSRF Failed: CSRF token incorrect." }, 403)
          : jsonResponse({ name: "c" }, 201);
      },
    });
    await createNamespace({ name: "c", shards: 1 });
    expect(posts).toBe(2);
    expect(headersOf(fetch.mock.calls[2]![1])["X-CSRFToken"]).toBe("renewed");
  });

  it("does not retry a CSRF failure forever", async () => {
    document.cookie = "csrftoken=stale; path=/";
    mockFetch({
      "GET /api/auth/csrf": { csrftoken: "still-bad" },
      "POST /api/namespaces/": () => jsonResponse({ detail: "CSRF Failed: CSRF cookie not set." }, 403),
    });
    await expect(createNamespace({ name: "d", shards: 1 })).rejects.toMatchObject({
      status: 403,
      detail: "CSRF Failed: CSRF cookie not set.",
    });
  });
});

describe("errors", () => {
  it("maps DRF field errors", async () => {
    document.cookie = "csrftoken=t; path=/";
    mockFetch({
      "POST /api/namespaces/": () =>
        jsonResponse({ name: ["namespace with this name already exists."], shards: ["Ensure this value is less than or equal to 1024."] }, 400),
    });
    const err = await createNamespace({ name: "x", shards: 5000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    const apiErr = err as ApiError;
    expect(apiErr.status).toBe(400);
    expect(apiErr.fieldErrors).toEqual({
      name: ["namespace with this name already exists."],
      shards: ["Ensure this value is less than or equal to 1024."],
    });
    expect(errorMessage(apiErr)).toBe(
      "name: namespace with this name already exists.; shards: Ensure this value is less than or equal to 1024.",
    );
  });

  it("reads problem details: field errors from errors, one refused argument from field and rule", async () => {
    document.cookie = "csrftoken=t; path=/";
    const problem = (extra: Record<string, unknown>, status = 400) =>
      jsonResponse({ type: "tag:lifecycle-store,2025:problem/validation_error", title: "Invalid input", status, detail: "name: taken", code: "validation_error", instance: "/api/namespaces/", ...extra }, status);
    mockFetch({ "POST /api/namespaces/": () => problem({ errors: { name: ["namespace with this name already exists."] } }) });
    const refused = (await createNamespace({ name: "x", shards: 1 }).catch((e: unknown) => e)) as ApiError;
    expect(refused.fieldErrors).toEqual({ name: ["namespace with this name already exists."] });
    expect(errorMessage(refused)).toBe("name: namespace with this name already exists.");
    mockFetch({ "POST /api/namespaces/": () => problem({ code: "invalid_argument", field: "shards", rule: "must be at most 1024" }) });
    const argument = (await createNamespace({ name: "x", shards: 5000 }).catch((e: unknown) => e)) as ApiError;
    expect(argument.fieldErrors).toEqual({ shards: ["must be at most 1024"] });
    mockFetch({ "POST /api/namespaces/": () => problem({ errors: { non_field_errors: ["Pick one."] } }) });
    await expect(createNamespace({ name: "x", shards: 1 })).rejects.toMatchObject({ detail: "Pick one." });
    mockFetch({ "GET /api/auth/me": () => problem({ detail: "the node node-1 is unavailable", code: "node_unavailable" }, 503) });
    await expect(getMe()).rejects.toMatchObject({ status: 503, detail: "the node node-1 is unavailable", fieldErrors: {} });
  });

  it("knows a missing login from a missing role by the problem's code", () => {
    const problem = (code: string, status: number) => new ApiError(status, "x", {}, { type: `t/${code}`, title: "T", status, detail: "x", code });
    expect(problem("not_authenticated", 403).isUnauthenticated).toBe(true);
    expect(problem("authentication_failed", 401).isUnauthenticated).toBe(true);
    expect(problem("permission_denied", 403).isUnauthenticated).toBe(false); // logged in, lacks the role
    expect(problem("permission_denied", 403).code).toBe("permission_denied");
    expect(new ApiError(403, "x", {}, "<html>").isUnauthenticated).toBe(true); // no code: by status
    expect(new ApiError(0, "x").code).toBeNull();
  });

  it("prefers detail, then non_field_errors", async () => {
    document.cookie = "csrftoken=t; path=/";
    mockFetch({ "POST /api/auth/login": () => jsonResponse({ non_field_errors: ["Invalid credentials."] }, 400), "GET /api/auth/csrf": { csrftoken: "t" } });
    await expect(login({ username: "a", password: "b" })).rejects.toMatchObject({ detail: "Invalid credentials." });
    mockFetch({ "GET /api/auth/me": () => jsonResponse({ detail: "Boom." }, 418) });
    await expect(getMe()).rejects.toMatchObject({ status: 418, detail: "Boom." });
  });

  it("explains a non-JSON server error", async () => {
    mockFetch({
      "GET /api/auth/me": () => new Response("<h1>Server Error</h1>", { status: 500, statusText: "Internal Server Error", headers: { "content-type": "text/html" } }),
    });
    const err = (await getMe().catch((e: unknown) => e)) as ApiError;
    expect(err.status).toBe(500);
    expect(err.detail).toMatch(/Server error \(500 Internal Server Error\)/);
  });

  it("reports an unreachable server as status 0", async () => {
    stubUnreachable();
    const err = (await getMe().catch((e: unknown) => e)) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.isNetworkError).toBe(true);
    expect(err.detail).toMatch(/Cannot reach the server/);
  });

  it("rejects HTML where JSON was expected (SPA fallback on a wrong path)", async () => {
    mockFetch({
      "GET /api/auth/me": () => new Response("<!doctype html><html></html>", { status: 200, headers: { "content-type": "text/html" } }),
    });
    await expect(getMe()).rejects.toMatchObject({ detail: expect.stringMatching(/not JSON/) });
  });

  it("errorMessage never returns an empty string", () => {
    expect(errorMessage(new Error(""))).toBe("Something went wrong.");
    expect(errorMessage("weird")).toBe("Something went wrong.");
    expect(errorMessage(new Error("plain"))).toBe("plain");
  });
});

function stubUnreachable() {
  mockFetch({
    "GET /api/auth/me": () => {
      throw new TypeError("Failed to fetch");
    },
  });
}

describe("endpoints", () => {
  it("getMe returns null when not logged in (401 or 403)", async () => {
    mockFetch({ "GET /api/auth/me": () => jsonResponse({ detail: "Authentication credentials were not provided." }, 403) });
    await expect(getMe()).resolves.toBeNull();
    mockFetch({ "GET /api/auth/me": () => jsonResponse({ detail: "nope" }, 401) });
    await expect(getMe()).resolves.toBeNull();
  });

  it("getHealth treats a 503 with a health body as data", async () => {
    const body = { status: "degraded", checked_at: "2024-01-01T00:00:00Z", components: { database: { ok: false, detail: "down" } } };
    mockFetch({ "GET /api/health": () => jsonResponse(body, 503) });
    await expect(getHealth()).resolves.toEqual(body);
  });

  it("getHealth fails on a 503 without a health body", async () => {
    mockFetch({ "GET /api/health": () => jsonResponse({ detail: "maintenance" }, 503) });
    await expect(getHealth()).rejects.toBeInstanceOf(ApiError);
  });

  it("listAll follows absolute next links as same-origin paths", async () => {
    const fetch = mockFetch({
      "GET /api/namespaces/": (url: string) => {
        if (!url.includes("cursor=")) {
          return jsonResponse({ next: "http://127.0.0.1:8000/api/namespaces/?cursor=p2", previous: null, results: [{ name: "a" }] });
        }
        return jsonResponse({ next: null, previous: "x", results: [{ name: "b" }, { name: "c" }] });
      },
    });
    const { items, truncated } = await listAll<{ name: string }>("/api/namespaces/");
    expect(items.map((i) => i.name)).toEqual(["a", "b", "c"]);
    expect(truncated).toBe(false);
    expect(fetch.mock.calls.map((c) => c[0])).toEqual(["/api/namespaces/", "/api/namespaces/?cursor=p2"]);
  });

  it("listAll stops at maxPages and on a self-referencing cursor", async () => {
    mockFetch({
      "GET /api/things/": (url: string) => {
        const n = Number(new URL(url, "http://x").searchParams.get("cursor") ?? "0");
        return jsonResponse({ next: `/api/things/?cursor=${n + 1}`, previous: null, results: [n] });
      },
    });
    await expect(listAll<number>("/api/things/", { maxPages: 3 })).resolves.toEqual({ items: [0, 1, 2], truncated: true });

    mockFetch({ "GET /api/loop/": { next: "/api/loop/", previous: null, results: [1] } });
    await expect(listAll<number>("/api/loop/")).resolves.toEqual({ items: [1], truncated: false });
  });

  it("listAll rejects a response that is not a page", async () => {
    mockFetch({ "GET /api/odd/": { items: [] } });
    await expect(listAll("/api/odd/")).rejects.toMatchObject({ detail: expect.stringMatching(/Unexpected list response/) });
  });
});

describe("helpers", () => {
  it("toApiPath strips scheme and host", () => {
    expect(toApiPath("http://127.0.0.1:8000/api/x/?cursor=a#h")).toBe("/api/x/?cursor=a#h");
    expect(toApiPath("/api/x/")).toBe("/api/x/");
  });

  it("flattenFieldErrors handles nested and scalar shapes", () => {
    expect(flattenFieldErrors({ a: ["x"], b: "y", c: { d: ["z"] }, e: [{ f: ["w"] }] })).toEqual({
      a: ["x"],
      b: ["y"],
      "c.d": ["z"],
      "e.0.f": ["w"],
    });
    expect(flattenFieldErrors(["top"])).toEqual({ non_field_errors: ["top"] });
  });
});

describe("the generated client", () => {
  it("fills path parameters URI-encoded, sends queries in the query string and drops empty values", async () => {
    const fetch = mockFetch({
      "GET /api/namespaces/a%20b/reports/lifecycle/summary": { days: [] },
      "GET /api/metrics/series": { lines: [] },
    });
    await answer(api.GET("/api/namespaces/{name}/reports/lifecycle/summary", { params: { path: { name: "a b" }, query: { days: 7 } } }));
    await answer(api.GET("/api/metrics/series", { params: { query: { series: "disk_used_ratio", range: "1h", namespace: "", node: undefined } } }));
    expect(fetch.mock.calls.map((c) => c[0])).toEqual([
      "/api/namespaces/a%20b/reports/lifecycle/summary?days=7",
      "/api/metrics/series?series=disk_used_ratio&range=1h",
    ]);
    expect(fetch.mock.calls[0]![1]?.body).toBeUndefined();
  });

  it("sends a DELETE's confirmation as its JSON body and answers undefined for a 204", async () => {
    document.cookie = "csrftoken=t; path=/";
    const fetch = mockFetch({ "DELETE /api/namespaces/orders/": () => new Response(null, { status: 204 }) });
    await expect(answer(api.DELETE("/api/namespaces/{name}/", { params: { path: { name: "orders" } }, body: confirmBody("orders") }))).resolves.toBeUndefined();
    expect(JSON.parse(String(fetch.mock.calls[0]![1]?.body))).toEqual({ confirm: "orders" });
    expect(headersOf(fetch.mock.calls[0]![1])["X-CSRFToken"]).toBe("t");
  });

  it("leaves an aborted request an AbortError", async () => {
    mockFetch({
      "GET /api/auth/me": () => {
        throw new DOMException("aborted", "AbortError");
      },
    });
    const err = await answer(api.GET("/api/auth/me")).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(ApiError);
    expect((err as Error).name).toBe("AbortError");
  });

  it("getPage calls the link's path with its query, cursor included", async () => {
    const fetch = mockFetch({ "GET /api/alerts/": { next: null, previous: null, results: [] } });
    await getPage("http://127.0.0.1:8000/api/alerts/?state=firing&cursor=abc");
    expect(fetch.mock.calls[0]![0]).toBe("/api/alerts/?state=firing&cursor=abc");
  });
});
