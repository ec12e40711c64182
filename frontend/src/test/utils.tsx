import { QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import { createMemoryRouter, RouterProvider } from "react-router";
import { vi } from "vitest";
import { createQueryClient } from "../app/queryClient";
import { routes } from "../app/router";
import type { TaskRun } from "../api/types";

export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

export type Handler = (url: string, init: RequestInit) => Response | Promise<Response>;

/**
 * Stub global fetch with "METHOD /path" → handler routes (query string
 * ignored for matching). Unknown routes answer 404 so tests fail loudly.
 */
export function mockFetch(routes: Record<string, Handler | unknown>) {
  const fn = vi.fn(async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.toString() : input.url;
    const method = (init.method ?? "GET").toUpperCase();
    const path = url.replace(/^https?:\/\/[^/]+/, "").split("?")[0];
    const route = routes[`${method} ${path}`];
    if (route === undefined) return jsonResponse({ detail: `no mock for ${method} ${path}` }, 404);
    if (typeof route === "function") return (route as Handler)(url, init);
    return jsonResponse(route);
  });
  vi.stubGlobal("fetch", fn);
  return fn;
}

export function clearCookies() {
  for (const part of document.cookie.split(";")) {
    const name = part.split("=")[0]?.trim();
    if (name) document.cookie = `${name}=; expires=Thu, 01 Jan 1970 00:00:00 GMT; path=/`;
  }
}

export function renderApp(path = "/") {
  const queryClient = createQueryClient();
  const defaults = queryClient.getDefaultOptions();
  queryClient.setDefaultOptions({
    ...defaults,
    queries: { ...defaults.queries, retry: false },
  });
  const router = createMemoryRouter(routes, { initialEntries: [path] });
  const utils = render(
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  );
  return { ...utils, router, queryClient };
}

/** The JSON body a mocked fetch call sent. */
export const body = (call: unknown[]) => JSON.parse(String((call[1] as RequestInit).body));

/** The mocked fetch calls to ``method path`` (query string ignored). */
export const callsTo = (fetch: ReturnType<typeof mockFetch>, method: string, path: string) =>
  fetch.mock.calls.filter((c) => ((c[1] as RequestInit | undefined)?.method ?? "GET") === method && String(c[0]).split("?")[0] === path);

/** A task run as the API lists it; ``extra`` overrides any field. */
export const taskRun = (id: number, extra: Partial<TaskRun> = {}): TaskRun => ({
  id,
  kind: "compaction",
  namespace: "orders",
  node: null,
  shard: null,
  state: "queued",
  progress: 0,
  steps: 0,
  counts: {},
  bytes_reclaimed: 0,
  summary: { records: 0, segments: 0, bytes: 0, pending_bytes: 0 },
  sweeps: 1,
  window_start: null,
  window_end: null,
  idle: false,
  namespaces_changed: [],
  dry_run: false,
  params: {},
  error: "",
  started_by: "olga",
  schedule: "",
  origin: "manual",
  cancel_requested: false,
  created_at: "2024-05-01T12:00:00Z",
  started_at: null,
  finished_at: null,
  ...extra,
});
