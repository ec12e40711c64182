// The one place that talks to the backend. Same origin, Django session auth:
// every request sends cookies (credentials: "same-origin") and every unsafe
// request (non-GET/HEAD/OPTIONS) carries the X-CSRFToken header.

import type { paths } from "./schema";
import type {
  ActionInfo,
  Alert,
  AlertChannel,
  AlertChannelInput,
  AlertRule,
  AlertRuleInput,
  AlertStatus,
  ChannelTestResult,
  CompactionEstimate,
  CsrfResponse,
  CursorPage,
  CursorRequest,
  CursorResult,
  DeleteConfirm,
  FieldErrors,
  Health,
  LifecycleReport,
  LoginRequest,
  MessagePage,
  MessageQuery,
  MetricRange,
  MetricSeries,
  MetricSeriesName,
  MetricsSummary,
  Namespace,
  NamespaceActionRequest,
  NamespaceCreate,
  NamespaceSummary,
  NodeActionRequest,
  NodeCreate,
  NodeUpdate,
  PolicyChangeRequest,
  PolicyScope,
  PolicyView,
  ProduceRequest,
  ProduceResult,
  SparkJobRequest,
  StorageNode,
  SubscriptionCreate,
  SubscriptionList,
  SubscriptionRow,
  SyncResult,
  TaskRun,
  User,
} from "./types";

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
// CSRF

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
  const res: CsrfResponse | undefined = await api("get", "/api/auth/csrf");
  csrfTokenFromBody = res?.csrftoken ?? null;
  const token = readCookie(CSRF_COOKIE) ?? csrfTokenFromBody;
  if (!token) throw new ApiError(0, "The server did not provide a CSRF token.");
  return token;
}

/** Forget any cached token (after login/logout the server rotates it). */
export function resetCsrfToken(): void {
  csrfTokenFromBody = null;
}

// ---------------------------------------------------------------------------
// Request core

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** JSON-serialised as the request body. */
  body?: unknown;
  signal?: AbortSignal;
  /** Extra statuses whose JSON body is returned instead of thrown (e.g. 503 health). */
  acceptStatus?: number[];
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

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

function errorFromBody(status: number, statusText: string, body: unknown): ApiError {
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

async function readBody(res: Response): Promise<unknown> {
  if (res.status === 204 || res.status === 205) return undefined;
  const text = await res.text();
  if (!text) return undefined;
  const type = res.headers.get("content-type") ?? "";
  if (type.includes("json")) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

async function request<T>(path: string, opts: RequestOptions = {}, retriedCsrf = false): Promise<T> {
  const method = opts.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  if (!SAFE_METHODS.has(method)) headers[CSRF_HEADER] = await getCsrfToken();

  let res: Response;
  try {
    res = await fetch(toApiPath(path), {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      credentials: "same-origin",
      signal: opts.signal,
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    if (err instanceof Error && err.name === "AbortError") throw err;
    throw new ApiError(
      0,
      "Cannot reach the server. Check your network connection and that the backend is running.",
    );
  }

  const body = await readBody(res);
  const accepted = res.ok || (opts.acceptStatus?.includes(res.status) ?? false);

  if (!accepted) {
    const error = errorFromBody(res.status, res.statusText, body);
    // A stale/missing CSRF token: fetch a fresh one and retry once.
    if (
      res.status === 403 &&
      !retriedCsrf &&
      !SAFE_METHODS.has(method) &&
      (error.code === "csrf_failed" || /csrf/i.test(error.detail))
    ) {
      await getCsrfToken(true);
      return request<T>(path, opts, true);
    }
    throw error;
  }

  if (body === undefined) return undefined as T;
  if (typeof body === "string") {
    // e.g. the SPA's index.html served for an unknown /api path.
    throw new ApiError(
      res.status,
      `Unexpected response from ${toApiPath(path)} (not JSON). Is the API available at this address?`,
      {},
      body,
    );
  }
  return body as T;
}

export const apiRequest = request;

// ---------------------------------------------------------------------------
// Typed calls: paths, parameters, bodies and answers checked against the OpenAPI schema

type HttpMethod = "get" | "post" | "patch" | "delete";

/** The schema's paths that take `M` (e.g. `ApiPath<"post">`). */
export type ApiPath<M extends HttpMethod> = {
  [P in keyof paths]: paths[P] extends { [K in M]: object } ? P : never;
}[keyof paths];

/** The schema's operation `M path`. */
type Operation<P extends keyof paths, M extends HttpMethod> = paths[P] extends { [K in M]: infer O } ? O : never;

type JsonContent<X> = X extends { content: { "application/json": infer T } } ? T : never;

/** What a successful call answers: the JSON of its 2xx response, undefined for a 204. */
export type Answer<O> = O extends { responses: infer R }
  ? { [C in keyof R]: C extends 200 | 201 | 202 ? JsonContent<R[C]> : C extends 204 ? undefined : never }[keyof R]
  : never;

type PathParams<O> = O extends { parameters: { path: infer A } } ? A : undefined;
type QueryParams<O> = O extends { parameters: { query?: infer Q } } ? Q : undefined;
type JsonBody<O> = O extends { requestBody?: infer B }
  ? [NonNullable<B>] extends [never]
    ? undefined
    : JsonContent<NonNullable<B>>
  : undefined;

/**
 * What a call takes besides method and path: `params` fill the path's `{placeholders}`, `query` is
 * the query string, `body` the JSON body; each is required exactly when the schema requires it.
 * A DELETE may carry a `{confirm}` body, which the schema does not describe (see DeleteConfirm).
 */
export type CallOptions<O, M extends HttpMethod> = { signal?: AbortSignal; acceptStatus?: number[] } & (PathParams<O> extends undefined
  ? { params?: undefined }
  : { params: PathParams<O> }) &
  ([QueryParams<O>] extends [undefined]
    ? { query?: undefined }
    : {} extends NonNullable<QueryParams<O>>
      ? { query?: QueryParams<O> }
      : { query: QueryParams<O> }) &
  (JsonBody<O> extends undefined
    ? { body?: M extends "delete" ? DeleteConfirm : undefined }
    : { body: JsonBody<O> });

type OptionsArg<T> = {} extends T ? [options?: T] : [options: T];

/** `path` with its `{placeholders}` filled from `params`, each URI-encoded. */
export function fillPath(path: string, params: Record<string, string | number> = {}): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`${path}: no value for {${name}}`);
    return encodeURIComponent(String(value));
  });
}

/**
 * One call of the API as the schema describes it: `api("get", "/api/namespaces/{name}/", {params: {name}})`.
 * tsc checks the path, the parameters and the body against the generated `paths` and types the answer;
 * the request itself is `request()`'s (cookies, CSRF header, errors).
 */
export function api<M extends HttpMethod, P extends ApiPath<M>>(
  method: M,
  path: P,
  ...[options]: OptionsArg<CallOptions<Operation<P, M>, M>>
): Promise<Answer<Operation<P, M>>> {
  const o = (options ?? {}) as {
    params?: Record<string, string | number>;
    query?: Record<string, QueryValue>;
    body?: unknown;
    signal?: AbortSignal;
    acceptStatus?: number[];
  };
  let url = fillPath(path, o.params);
  if (o.query) url = withQuery(url, o.query);
  return request<Answer<Operation<P, M>>>(url, {
    method: method.toUpperCase() as NonNullable<RequestOptions["method"]>,
    body: o.body,
    signal: o.signal,
    acceptStatus: o.acceptStatus,
  });
}

/** GET paths that answer a cursor page, and the row type of their pages. */
export type PagedPath = {
  [P in ApiPath<"get">]: Answer<Operation<P, "get">> extends { results: unknown[] } ? P : never;
}[ApiPath<"get">];
export type PageRow<P extends PagedPath> = Answer<Operation<P, "get">> extends { results: (infer T)[] } ? T : never;
/** The query parameters (filters, ordering, page size) a paged GET path takes. */
export type PageQuery<P extends PagedPath> = NonNullable<QueryParams<Operation<P, "get">>>;

/** The first page's URL of a paged list with these filters (empty ones left out); later pages follow `next`. */
export function pageUrl<P extends PagedPath>(path: P, query: { [K in keyof PageQuery<P>]?: PageQuery<P>[K] | null | "" } = {}): string {
  return withQuery(path, query as Record<string, QueryValue>);
}

// ---------------------------------------------------------------------------
// Endpoints

/** The logged-in user, or null when not logged in (401/403). */
export async function getMe(signal?: AbortSignal): Promise<User | null> {
  try {
    return await api("get", "/api/auth/me", { signal });
  } catch (err) {
    if (err instanceof ApiError && err.isUnauthenticated) return null;
    throw err;
  }
}

export async function login(credentials: LoginRequest): Promise<User> {
  // Always start from a fresh token: this also sets the cookie.
  await getCsrfToken(true);
  const user = await api("post", "/api/auth/login", { body: credentials });
  resetCsrfToken(); // Django rotates the token at login.
  return user;
}

export async function logout(): Promise<void> {
  try {
    await api("post", "/api/auth/logout");
  } finally {
    resetCsrfToken();
  }
}

function isHealth(body: unknown): body is Health {
  return (
    !!body &&
    typeof body === "object" &&
    typeof (body as Health).status === "string" &&
    !!(body as Health).components &&
    typeof (body as Health).components === "object"
  );
}

/** Public health check; a 503 carrying a health body is data, not an error. */
export async function getHealth(signal?: AbortSignal): Promise<Health> {
  // The schema types the 200 answer; a 503 is whatever the server sent, so it is checked.
  const body: unknown = await api("get", "/api/health", { signal, acceptStatus: [503] });
  if (!isHealth(body)) {
    throw new ApiError(503, "The health endpoint answered without component data.", {}, body);
  }
  return body;
}

/** Follows cursor pagination (`next`) up to `maxPages` pages. */
export async function listAll<T>(
  path: string,
  opts: { signal?: AbortSignal; maxPages?: number } = {},
): Promise<{ items: T[]; truncated: boolean }> {
  const maxPages = opts.maxPages ?? 100;
  const items: T[] = [];
  const seen = new Set<string>();
  let next: string | null = path;
  let pages = 0;
  while (next && pages < maxPages) {
    const url = toApiPath(next);
    if (seen.has(url)) break; // defensive: a cursor that points at itself
    seen.add(url);
    const page: CursorPage<T> = await request<CursorPage<T>>(url, { signal: opts.signal });
    if (!page || !Array.isArray(page.results)) {
      throw new ApiError(200, `Unexpected list response from ${url}.`, {}, page);
    }
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

export function listNamespaces(signal?: AbortSignal) {
  return listPaged("/api/namespaces/", { signal });
}

export function createNamespace(body: NamespaceCreate): Promise<Namespace> {
  return api("post", "/api/namespaces/", { body });
}

// ---------------------------------------------------------------------------
// Query strings and single cursor pages

export type QueryValue = string | number | boolean | null | undefined;

/**
 * `path` with the non-empty params appended as a query string, in the order
 * given: withQuery("/api/x/", {a: 1, b: "", c: null, d: false}) → "/api/x/?a=1&d=false".
 */
export function withQuery(path: string, params: Record<string, QueryValue>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    if (typeof v === "number" && !Number.isFinite(v)) continue;
    q.append(k, String(v));
  }
  const text = q.toString();
  if (!text) return path;
  return `${path}${path.includes("?") ? "&" : "?"}${text}`;
}

/** One cursor page: `url` is a first-page URL (see pageUrl) or a `next`/`previous` link. */
export async function getPage<T>(url: string, signal?: AbortSignal): Promise<CursorPage<T>> {
  const path = toApiPath(url);
  const page = await request<CursorPage<T>>(path, { signal });
  if (!page || !Array.isArray(page.results)) {
    throw new ApiError(200, `Unexpected list response from ${path}.`, {}, page);
  }
  return page;
}

// ---------------------------------------------------------------------------
// Namespaces

export function getNamespace(name: string, signal?: AbortSignal): Promise<Namespace> {
  return api("get", "/api/namespaces/{name}/", { params: { name }, signal });
}

export function deleteNamespace(name: string, confirm: string): Promise<void> {
  return api("delete", "/api/namespaces/{name}/", { params: { name }, body: { confirm } });
}

export function getNamespaceSummary(name: string, signal?: AbortSignal): Promise<NamespaceSummary> {
  return api("get", "/api/namespaces/{name}/summary", { params: { name }, signal });
}

export function syncNamespace(name: string): Promise<SyncResult> {
  return api("post", "/api/namespaces/{name}/sync", { params: { name } });
}

export function listActions(signal?: AbortSignal): Promise<ActionInfo[]> {
  return api("get", "/api/actions", { signal });
}

export function startNamespaceAction(name: string, body: NamespaceActionRequest): Promise<TaskRun> {
  return api("post", "/api/namespaces/{name}/actions", { params: { name }, body });
}

export function getCompactionEstimate(name: string, signal?: AbortSignal): Promise<CompactionEstimate> {
  return api("get", "/api/namespaces/{name}/compaction-estimate", { params: { name }, signal });
}

export function browseMessages(name: string, q: MessageQuery, signal?: AbortSignal): Promise<MessagePage> {
  return api("get", "/api/namespaces/{name}/messages", { params: { name }, query: q, signal });
}

/** Produce a test message (operator); answers where it landed. */
export function produceMessage(name: string, body: ProduceRequest): Promise<ProduceResult> {
  return api("post", "/api/namespaces/{name}/messages", { params: { name }, body });
}

// ---------------------------------------------------------------------------
// Subscriptions

export function listSubscriptions(name: string, signal?: AbortSignal): Promise<SubscriptionList> {
  return api("get", "/api/namespaces/{name}/subscriptions", { params: { name }, signal });
}

export function createSubscription(name: string, body: SubscriptionCreate): Promise<SubscriptionRow> {
  return api("post", "/api/namespaces/{name}/subscriptions", { params: { name }, body });
}

export function deleteSubscription(name: string, subscription: string, confirm: string): Promise<void> {
  return api("delete", "/api/namespaces/{name}/subscriptions/{subscription}", {
    params: { name, subscription },
    body: { confirm },
  });
}

/** Reset, skip or clear a subscription's cursor (operator; `confirm` repeats its name). */
export function moveSubscriptionCursor(name: string, subscription: string, body: CursorRequest): Promise<CursorResult> {
  return api("post", "/api/namespaces/{name}/subscriptions/{subscription}/cursor", {
    params: { name, subscription },
    body,
  });
}

// ---------------------------------------------------------------------------
// Policies

export function getPolicy(scope: PolicyScope, signal?: AbortSignal): Promise<PolicyView> {
  switch (scope.kind) {
    case "cluster":
      return api("get", "/api/policies/cluster", { signal });
    case "namespace":
      return api("get", "/api/namespaces/{name}/policy", { params: { name: scope.name }, signal });
    case "node":
      return api("get", "/api/nodes/{name}/policy", { params: { name: scope.name }, signal });
  }
}

export function updatePolicy(scope: PolicyScope, body: PolicyChangeRequest): Promise<PolicyView> {
  switch (scope.kind) {
    case "cluster":
      return api("patch", "/api/policies/cluster", { body });
    case "namespace":
      return api("patch", "/api/namespaces/{name}/policy", { params: { name: scope.name }, body });
    case "node":
      return api("patch", "/api/nodes/{name}/policy", { params: { name: scope.name }, body });
  }
}

// ---------------------------------------------------------------------------
// Nodes

export async function listNodes(signal?: AbortSignal): Promise<StorageNode[]> {
  // Not paginated today (the schema says an array); accept a page too in case that changes.
  const body = (await api("get", "/api/nodes/", { signal })) as StorageNode[] | CursorPage<StorageNode>;
  return Array.isArray(body) ? body : (body?.results ?? []);
}

export function createNode(body: NodeCreate): Promise<StorageNode> {
  return api("post", "/api/nodes/", { body });
}

export function updateNode(name: string, body: NodeUpdate): Promise<StorageNode> {
  return api("patch", "/api/nodes/{name}/", { params: { name }, body });
}

export function deleteNode(name: string): Promise<void> {
  return api("delete", "/api/nodes/{name}/", { params: { name } });
}

export function startNodeAction(name: string, body: NodeActionRequest): Promise<TaskRun> {
  return api("post", "/api/nodes/{name}/actions", { params: { name }, body });
}

// ---------------------------------------------------------------------------
// Runs

export function getRun(id: number, signal?: AbortSignal): Promise<TaskRun> {
  return api("get", "/api/runs/{id}/", { params: { id }, signal });
}

export function cancelRun(id: number): Promise<TaskRun> {
  return api("post", "/api/runs/{id}/cancel", { params: { id } });
}

// Segments, runs, audit entries and alerts are fetched page by page with getPage() from a pageUrl().

// ---------------------------------------------------------------------------
// Lifecycle reports and Spark jobs

/** The namespace's `days` most recent report days, newest first, with the server's totals over them. */
export function getLifecycleReport(name: string, days: number, signal?: AbortSignal): Promise<LifecycleReport> {
  return api("get", "/api/namespaces/{name}/reports/lifecycle/summary", { params: { name }, query: { days }, signal });
}

/** Start a Spark job (operator); answers the task run to poll. */
export function startSparkJob(body: SparkJobRequest): Promise<TaskRun> {
  return api("post", "/api/spark-jobs", { body });
}

// ---------------------------------------------------------------------------
// Metrics

export function getMetricsSummary(signal?: AbortSignal): Promise<MetricsSummary> {
  return api("get", "/api/metrics/summary", { signal });
}

export function getMetricSeries(
  params: { series: MetricSeriesName; range: MetricRange; namespace?: string; node?: string },
  signal?: AbortSignal,
): Promise<MetricSeries> {
  return api("get", "/api/metrics/series", { query: params, signal });
}

// ---------------------------------------------------------------------------
// Alerts

/** Whether alerts fire (the Overview's overall status), with counts. */
export function getAlertStatus(signal?: AbortSignal): Promise<AlertStatus> {
  return api("get", "/api/alerts/status", { signal });
}

export function ackAlert(id: number): Promise<Alert> {
  return api("post", "/api/alerts/{id}/ack", { params: { id } });
}

export function silenceAlert(id: number, minutes: number): Promise<Alert> {
  return api("post", "/api/alerts/{id}/silence", { params: { id }, body: { minutes } });
}

/** A list endpoint that answers a plain array (or, should that change, cursor pages). */
export async function listPlainOrPaged<T>(path: string, signal?: AbortSignal): Promise<{ items: T[]; truncated: boolean }> {
  const body = await request<T[] | CursorPage<T>>(path, { signal });
  if (Array.isArray(body)) return { items: body, truncated: false };
  if (body && Array.isArray(body.results)) {
    if (!body.next) return { items: body.results, truncated: false };
    const rest = await listAll<T>(body.next, { signal });
    return { items: [...body.results, ...rest.items], truncated: rest.truncated };
  }
  throw new ApiError(200, `Unexpected list response from ${path}.`, {}, body);
}

/** The rows of a GET path that answers a plain array, typed by the path. */
type ListRow<P extends ApiPath<"get">> = Answer<Operation<P, "get">> extends (infer T)[] ? T : never;

function listPlain<P extends ApiPath<"get">>(path: P, signal?: AbortSignal) {
  return listPlainOrPaged<ListRow<P>>(path, signal);
}

export function listAlertRules(signal?: AbortSignal) {
  return listPlain("/api/alert-rules/", signal);
}

export function saveAlertRule(body: AlertRuleInput, id?: number): Promise<AlertRule> {
  return id === undefined
    ? api("post", "/api/alert-rules/", { body })
    : api("patch", "/api/alert-rules/{id}/", { params: { id }, body });
}

export function deleteAlertRule(id: number): Promise<void> {
  return api("delete", "/api/alert-rules/{id}/", { params: { id } });
}

export function listAlertChannels(signal?: AbortSignal) {
  return listPlain("/api/alert-channels/", signal);
}

export function saveAlertChannel(body: AlertChannelInput, id?: number): Promise<AlertChannel> {
  return id === undefined
    ? api("post", "/api/alert-channels/", { body })
    : api("patch", "/api/alert-channels/{id}/", { params: { id }, body });
}

export function deleteAlertChannel(id: number): Promise<void> {
  return api("delete", "/api/alert-channels/{id}/", { params: { id } });
}

/** Turn a rule (a built-in one too) off or on: operators, audited. Off closes its open alerts. */
export function setAlertRuleEnabled(id: number, enabled: boolean): Promise<AlertRule> {
  return api("post", "/api/alert-rules/{id}/enabled", { params: { id }, body: { enabled } });
}

/** Send a test message through a channel now: operators, audited; answers whether it was delivered. */
export function testAlertChannel(id: number): Promise<ChannelTestResult> {
  return api("post", "/api/alert-channels/{id}/test", { params: { id } });
}
