// The one place that talks to the backend: `api`, an openapi-fetch client over the generated `paths`
// (schema.d.ts), so every call — `api.GET("/api/namespaces/{name}/", { params: { path: { name } } })` — is
// checked by tsc against the OpenAPI schema: path, method, path and query parameters, body and answer.
//
// What every call gets, in one place (the middleware below and `sameOriginFetch`):
// - same origin, Django session auth: cookies on every request (credentials: "same-origin"), paths sent
//   relative to the page so the dev proxy works;
// - the X-CSRFToken header on every unsafe request (cookie, else GET /api/auth/csrf), one retry with a
//   fresh token after a CSRF failure;
// - errors thrown as ApiError: RFC 9457 problem details (and plain DRF bodies) read into `detail` and
//   named `fieldErrors`; an unreachable server is status 0; HTML where JSON was expected is refused.
// A 401/403 anywhere makes the query client re-check /api/auth/me (app/queryClient.ts), and RequireAuth
// sends a logged-out user to /login.

import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "./schema";
import type { CursorPage, DeleteConfirm, FieldErrors } from "./types";

export const CSRF_COOKIE = "csrftoken";
export const CSRF_HEADER = "X-CSRFToken";

/** An HTTP or network failure, with the backend's message when it sent one. */
export class ApiError extends Error {
  /** HTTP status; 0 when the server could not be reached at all. */
  readonly status: number;
  /** Human-readable message: DRF `detail`, non-field errors or a fallback. */
  readonly detail: string;
  /** DRF field errors (`{"name": ["..."]}`), without `detail`/`non_field_errors`. */
  readonly fieldErrors: FieldErrors;
  /** Parsed response body (JSON) or raw text, for debugging. */
  readonly body: unknown;

  constructor(status: number, detail: string, fieldErrors: FieldErrors = {}, body: unknown = null) {
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
    this.fieldErrors = fieldErrors;
    this.body = body;
  }

  /** The problem details' `code` (`validation_error`, `not_authenticated`, `csrf_failed`, …), or null for
   * a body that is not one (a network failure, a proxy's page). */
  get code(): string | null {
    const body = this.body as { code?: unknown } | null;
    return body && typeof body === "object" && typeof body.code === "string" ? body.code : null;
  }

  /** Not logged in: the API says so by its code (a 403 for a logged-in user's missing role is
   * `permission_denied`, not this); without a code, 401 or 403. */
  get isUnauthenticated(): boolean {
    const code = this.code;
    if (code !== null) return code === "not_authenticated" || code === "authentication_failed";
    return this.status === 401 || this.status === 403;
  }

  get isNetworkError(): boolean {
    return this.status === 0;
  }

  /** The endpoint does not exist (yet) or the object is gone. */
  get isNotFound(): boolean {
    return this.status === 404;
  }
}

/** True for a 404 ApiError: used to show "not available yet" for new endpoints. */
export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}

/** Message to show a person for any thrown value; never empty. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) {
    const fields = Object.entries(err.fieldErrors);
    if (fields.length > 0 && err.detail === GENERIC_FIELD_MESSAGE) {
      return fields.map(([field, msgs]) => `${field}: ${msgs.join(" ")}`).join("; ");
    }
    return err.detail;
  }
  if (err instanceof Error && err.message) return err.message;
  return "Something went wrong.";
}

/** `detail` of an ApiError that only carries field errors. */
export const GENERIC_FIELD_MESSAGE = "Please correct the highlighted fields.";

// ---------------------------------------------------------------------------
// Error bodies

/** Flatten DRF error bodies (nested dicts/lists) into field → messages. */
export function flattenFieldErrors(value: unknown, prefix = ""): FieldErrors {
  const out: FieldErrors = {};
  const push = (key: string, msg: string) => {
    (out[key] ??= []).push(msg);
  };
  const walk = (v: unknown, key: string) => {
    if (v == null) return;
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") {
      push(key || "non_field_errors", String(v));
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => {
        if (item !== null && typeof item === "object") walk(item, key ? `${key}.${i}` : String(i));
        else walk(item, key);
      });
    } else if (typeof v === "object") {
      for (const [k, inner] of Object.entries(v as Record<string, unknown>)) {
        walk(inner, key ? `${key}.${k}` : k);
      }
    }
  };
  walk(value, prefix);
  return out;
}

/**
 * An RFC 9457 problem details body (`application/problem+json`), the one error shape of the API and the
 * nodes: `type`, `title`, `status`, `detail`, `code`, `instance`, and extensions — `errors` (field →
 * messages) for refused input, `field` and `rule` for one refused argument.
 */
function isProblem(obj: Record<string, unknown>): boolean {
  return typeof obj.type === "string" && typeof obj.title === "string" && typeof obj.status === "number";
}

function errorFromProblem(status: number, fallback: string, obj: Record<string, unknown>): ApiError {
  const { non_field_errors: nonField, ...rest } =
    obj.errors && typeof obj.errors === "object" && !Array.isArray(obj.errors)
      ? (obj.errors as Record<string, unknown>)
      : {};
  const fieldErrors = flattenFieldErrors(rest);
  if (typeof obj.field === "string" && obj.field && typeof obj.rule === "string" && !fieldErrors[obj.field]) {
    fieldErrors[obj.field] = [obj.rule];
  }
  const nonFieldMsgs = flattenFieldErrors(nonField ?? [])["non_field_errors"] ?? [];
  let message: string;
  if (nonFieldMsgs.length) message = nonFieldMsgs.join(" ");
  else if (Object.keys(fieldErrors).length) message = GENERIC_FIELD_MESSAGE;
  else if (typeof obj.detail === "string" && obj.detail) message = obj.detail;
  else message = fallback;
  return new ApiError(status, message, fieldErrors, obj);
}

/** The ApiError for an error response's body (problem details, a plain DRF body, text or nothing). */
export function errorFromBody(status: number, statusText: string, body: unknown): ApiError {
  const fallback = statusFallback(status, statusText);
  if (body && typeof body === "object" && !Array.isArray(body) && isProblem(body as Record<string, unknown>)) {
    return errorFromProblem(status, fallback, body as Record<string, unknown>);
  }
  if (body && typeof body === "object" && !Array.isArray(body)) {
    const obj = body as Record<string, unknown>;
    const { detail, non_field_errors: nonField, ...rest } = obj;
    const fieldErrors = flattenFieldErrors(rest);
    const nonFieldMsgs = flattenFieldErrors(nonField ?? [])["non_field_errors"] ?? [];
    let message: string;
    if (typeof detail === "string" && detail) message = detail;
    else if (nonFieldMsgs.length) message = nonFieldMsgs.join(" ");
    else if (Object.keys(fieldErrors).length) message = GENERIC_FIELD_MESSAGE;
    else message = fallback;
    return new ApiError(status, message, fieldErrors, body);
  }
  if (Array.isArray(body) && body.length) {
    return new ApiError(status, body.map(String).join(" "), {}, body);
  }
  return new ApiError(status, fallback, {}, body);
}

function statusFallback(status: number, statusText: string): string {
  switch (status) {
    case 400:
      return "The request was not accepted (400).";
    case 401:
    case 403:
      return "You are not allowed to do this. Log in again or ask an admin for access.";
    case 404:
      return "Not found (404).";
    case 429:
      return "Too many requests; wait a moment and try again.";
    case 502:
    case 503:
    case 504:
      return `The backend is unavailable (${status}). Check that the server is running.`;
    default:
      return status >= 500
        ? `Server error (${status}${statusText ? ` ${statusText}` : ""}). Check the server logs.`
        : `Request failed (${status}${statusText ? ` ${statusText}` : ""}).`;
  }
}

/** The body of a response: parsed JSON when it says JSON, else its text; undefined when empty. */
async function readBody(res: Response): Promise<unknown> {
  if (res.status === 204 || res.status === 205) return undefined;
  const text = await res.text();
  if (!text) return undefined;
  if ((res.headers.get("content-type") ?? "").includes("json")) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

// ---------------------------------------------------------------------------
// Paths and query strings

/**
 * Turn an absolute URL from the API (e.g. DRF's `next`) into a same-origin
 * path, so that the dev proxy and the session cookie keep working.
 */
export function toApiPath(url: string): string {
  if (url.startsWith("/")) return url;
  try {
    const u = new URL(url);
    return `${u.pathname}${u.search}${u.hash}`;
  } catch {
    return url;
  }
}

export type QueryValue = string | number | boolean | null | undefined;

/** The non-empty params as a query string (no `?`), in the order given; empty, null and non-finite values
 * are left out. Every call's query goes through this (the client's querySerializer). */
export function queryString(params: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    if (typeof v === "number" && !Number.isFinite(v)) continue;
    q.append(k, String(v));
  }
  return q.toString();
}

/**
 * `path` with the non-empty params appended as a query string, in the order
 * given: withQuery("/api/x/", {a: 1, b: "", c: null, d: false}) → "/api/x/?a=1&d=false".
 */
export function withQuery(path: string, params: Record<string, QueryValue>): string {
  const text = queryString(params);
  if (!text) return path;
  return `${path}${path.includes("?") ? "&" : "?"}${text}`;
}

// ---------------------------------------------------------------------------
// The client

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Where openapi-fetch builds its Request URLs; `sameOriginFetch` sends only the path. */
const BASE_URL = typeof location !== "undefined" && location.origin.startsWith("http") ? location.origin : "http://localhost";

/**
 * The only `fetch` of the frontend: sends openapi-fetch's Request as a same-origin path with the session
 * cookie. `globalThis.fetch` is looked up on every call (tests stub it).
 */
async function sameOriginFetch(request: Request): Promise<Response> {
  const body = SAFE_METHODS.has(request.method) ? undefined : await request.text();
  return fetch(toApiPath(request.url), {
    method: request.method,
    headers: request.headers,
    body: body === "" ? undefined : body,
    credentials: "same-origin",
    signal: request.signal,
  });
}

export const api = createClient<paths>({
  baseUrl: BASE_URL,
  fetch: sameOriginFetch,
  credentials: "same-origin",
  headers: { Accept: "application/json" },
  querySerializer: queryString,
});

// ---- CSRF ------------------------------------------------------------------

let csrfTokenFromBody: string | null = null;

export function readCookie(name: string): string | null {
  if (typeof document === "undefined" || !document.cookie) return null;
  for (const part of document.cookie.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const raw = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(raw);
      } catch {
        return raw;
      }
    }
  }
  return null;
}

/**
 * The CSRF token to send. Prefers the cookie (Django rotates it at login);
 * falls back to the token returned by GET /api/auth/csrf in case the cookie
 * is HttpOnly. `refresh` asks the server for a token first.
 */
export async function getCsrfToken(refresh = false): Promise<string> {
  if (!refresh) {
    const fromCookie = readCookie(CSRF_COOKIE);
    if (fromCookie) return fromCookie;
    if (csrfTokenFromBody) return csrfTokenFromBody;
  }
  const { data } = await api.GET("/api/auth/csrf");
  csrfTokenFromBody = data?.csrftoken ?? null;
  const token = readCookie(CSRF_COOKIE) ?? csrfTokenFromBody;
  if (!token) throw new ApiError(0, "The server did not provide a CSRF token.");
  return token;
}

/** Forget any cached token (after login/logout the server rotates it). */
export function resetCsrfToken(): void {
  csrfTokenFromBody = null;
}

/** Unsafe requests kept (cloned, body unread) until answered, to send again after a CSRF failure. */
const unsafeRequests = new Map<string, Request>();

/** X-CSRFToken on unsafe methods; a CSRF failure fetches a fresh token and sends the request once more. */
const csrfMiddleware: Middleware = {
  async onRequest({ request, id }) {
    if (SAFE_METHODS.has(request.method)) return undefined;
    request.headers.set(CSRF_HEADER, await getCsrfToken());
    unsafeRequests.set(id, request.clone());
    return request;
  },
  async onResponse({ response, id, options }) {
    const original = unsafeRequests.get(id);
    unsafeRequests.delete(id);
    if (!original || response.status !== 403) return undefined;
    const error = errorFromBody(response.status, response.statusText, await readBody(response.clone()));
    if (error.code !== "csrf_failed" && !/csrf/i.test(error.detail)) return undefined;
    original.headers.set(CSRF_HEADER, await getCsrfToken(true));
    return options.fetch(original);
  },
  onError({ id }) {
    unsafeRequests.delete(id);
    return undefined;
  },
};

// ---- Errors ----------------------------------------------------------------

/** Statuses a request takes as data instead of an error (see `acceptStatus`). */
const acceptedStatuses = new WeakMap<Request, number[]>();

/**
 * Per-request middleware: these error statuses are answers, returned as `error` with their body (e.g.
 * the health check's 503, which carries the health of each component).
 */
export function acceptStatus(...statuses: number[]): Middleware {
  return {
    onRequest({ request }) {
      acceptedStatuses.set(request, statuses);
      return undefined;
    },
  };
}

/**
 * Every error response becomes a thrown ApiError (problem details read into `detail` and `fieldErrors`);
 * a success that is not JSON (the SPA's index.html for a wrong path) is refused; an unreachable server is
 * an ApiError with status 0. An aborted request stays an AbortError.
 */
const errorMiddleware: Middleware = {
  async onResponse({ request, response }) {
    if (!response.ok) {
      if (acceptedStatuses.get(request)?.includes(response.status)) return undefined;
      throw errorFromBody(response.status, response.statusText, await readBody(response));
    }
    const body = await readBody(response.clone());
    if (body === undefined) {
      // Nothing to parse: openapi-fetch answers `data: undefined` for a Content-Length of 0.
      return new Response(null, { status: response.status === 205 ? 204 : response.status, headers: { "Content-Length": "0" } });
    }
    if (typeof body === "string") {
      // e.g. the SPA's index.html served for an unknown /api path.
      throw new ApiError(
        response.status,
        `Unexpected response from ${toApiPath(request.url)} (not JSON). Is the API available at this address?`,
        {},
        body,
      );
    }
    return undefined;
  },
  onError({ error }) {
    if (error instanceof ApiError) return error;
    if ((error as { name?: unknown } | null)?.name === "AbortError") return undefined; // thrown as it is
    return new ApiError(0, "Cannot reach the server. Check your network connection and that the backend is running.");
  },
};

// onResponse runs last-registered first: the CSRF retry sees the response before it becomes an error.
api.use(errorMiddleware, csrfMiddleware);

/**
 * The answer of a call: errors were thrown by the middleware already, so what is left is the typed
 * `data` (undefined for a 204): `const ns = await answer(api.GET("/api/namespaces/{name}/", …))`.
 */
export async function answer<R extends { data?: unknown }>(call: Promise<R>): Promise<DataOf<R>> {
  return (await call).data as DataOf<R>;
}

/** The `data` of openapi-fetch's success answer (its other member is the error). */
type DataOf<R> = R extends { data: infer D; error?: never } ? D : never;

/**
 * A DELETE confirmed by repeating a name carries `{confirm}` as its body. The schema cannot say so
 * (drf-spectacular documents no DELETE request body), so this is the one body typed by hand.
 */
export function confirmBody(confirm: string): never {
  return { confirm } satisfies DeleteConfirm as never;
}

// ---------------------------------------------------------------------------
// Cursor pagination

/** GET paths that answer a cursor page. */
export type PagedPath = {
  [P in keyof paths]: paths[P] extends { get: { responses: { 200: { content: { "application/json": { results: unknown[]; next?: unknown } } } } } }
    ? P
    : never;
}[keyof paths];
/** The row type of a paged path's pages. */
export type PageRow<P extends PagedPath> = paths[P] extends {
  get: { responses: { 200: { content: { "application/json": { results: (infer T)[] } } } } };
}
  ? T
  : never;
/** The query parameters (filters, ordering, page size) a paged GET path takes. */
export type PageQuery<P extends PagedPath> = NonNullable<
  paths[P] extends { get: { parameters: { query?: infer Q } } } ? Q : never
>;

/** The first page's URL of a paged list with these filters (empty ones left out); later pages follow `next`. */
export function pageUrl<P extends PagedPath>(path: P, query: { [K in keyof PageQuery<P>]?: PageQuery<P>[K] | null | "" } = {}): string {
  return withQuery(path, query as Record<string, QueryValue>);
}

/**
 * One cursor page: `url` is a first-page URL (see pageUrl) or a `next`/`previous` link of the API. The
 * call is `api.GET` of the link's path with its query (filters and `cursor`) as the query parameters.
 */
export async function getPage<T>(url: string, signal?: AbortSignal): Promise<CursorPage<T>> {
  const link = new URL(toApiPath(url), BASE_URL);
  const path = link.pathname as PagedPath;
  const query = Object.fromEntries(link.searchParams) as PageQuery<PagedPath>;
  const page = (await answer(api.GET(path, { params: { query }, signal }))) as unknown as CursorPage<T> | undefined;
  if (!page || !Array.isArray(page.results)) {
    throw new ApiError(200, `Unexpected list response from ${toApiPath(url)}.`, {}, page);
  }
  return page;
}

/** Follows cursor pagination (`next`) up to `maxPages` pages. */
export async function listAll<T>(
  url: string,
  opts: { signal?: AbortSignal; maxPages?: number } = {},
): Promise<{ items: T[]; truncated: boolean }> {
  const maxPages = opts.maxPages ?? 100;
  const items: T[] = [];
  const seen = new Set<string>();
  let next: string | null = url;
  let pages = 0;
  while (next && pages < maxPages) {
    const path = toApiPath(next);
    if (seen.has(path)) break; // defensive: a cursor that points at itself
    seen.add(path);
    const page: CursorPage<T> = await getPage<T>(path, opts.signal);
    items.push(...page.results);
    next = page.next ?? null;
    pages += 1;
  }
  return { items, truncated: next !== null && pages >= maxPages };
}

/** Every row of a paged list (following `next`), typed by its path. */
export function listPaged<P extends PagedPath>(path: P, opts: { signal?: AbortSignal; maxPages?: number } = {}) {
  return listAll<PageRow<P>>(path, opts);
}

/** The rows of a list that answers a plain array or (should that change) cursor pages, following `next`. */
export async function rowsOf<T>(body: T[] | CursorPage<T> | undefined, from: string, signal?: AbortSignal): Promise<{ items: T[]; truncated: boolean }> {
  if (Array.isArray(body)) return { items: body, truncated: false };
  if (body && Array.isArray(body.results)) {
    if (!body.next) return { items: body.results, truncated: false };
    const rest = await listAll<T>(body.next, { signal });
    return { items: [...body.results, ...rest.items], truncated: rest.truncated };
  }
  throw new ApiError(200, `Unexpected list response from ${from}.`, {}, body);
}
