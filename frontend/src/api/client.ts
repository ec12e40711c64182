// The one place that talks to the backend. Same origin, Django session auth:
// every request sends cookies (credentials: "same-origin") and every unsafe
// request (non-GET/HEAD/OPTIONS) carries the X-CSRFToken header.

import type {
  ActionInfo,
  Alert,
  AlertChannel,
  AlertChannelInput,
  AlertRule,
  AlertRuleInput,
  AlertStatus,
  CompactionEstimate,
  CsrfResponse,
  CursorPage,
  CursorRequest,
  CursorResult,
  FieldErrors,
  Health,
  LifecycleReport,
  LoginRequest,
  MessagePage,
  MessageQuery,
  MetricRange,
  MetricSeries,
  MetricsSummary,
  Namespace,
  NamespaceActionRequest,
  NamespaceCreate,
  NamespaceSummary,
  NodeActionRequest,
  NodeCreate,
  PolicyChangeRequest,
  PolicyScope,
  PolicyView,
  ProduceRequest,
  ProduceResult,
  SparkJobRequest,
  StorageNode,
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

  /** Not logged in (DRF answers 403 for session auth, 401 for others). */
  get isUnauthenticated(): boolean {
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
  const res = await request<CsrfResponse>("/api/auth/csrf");
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

function errorFromBody(status: number, statusText: string, body: unknown): ApiError {
  const fallback = statusFallback(status, statusText);
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
      /csrf/i.test(error.detail)
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
// Endpoints

/** The logged-in user, or null when not logged in (401/403). */
export async function getMe(signal?: AbortSignal): Promise<User | null> {
  try {
    return await request<User>("/api/auth/me", { signal });
  } catch (err) {
    if (err instanceof ApiError && err.isUnauthenticated) return null;
    throw err;
  }
}

export async function login(credentials: LoginRequest): Promise<User> {
  // Always start from a fresh token: this also sets the cookie.
  await getCsrfToken(true);
  const user = await request<User>("/api/auth/login", { method: "POST", body: credentials });
  resetCsrfToken(); // Django rotates the token at login.
  return user;
}

export async function logout(): Promise<void> {
  try {
    await request<void>("/api/auth/logout", { method: "POST" });
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
  const body = await request<unknown>("/api/health", { signal, acceptStatus: [503] });
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
    next = page.next;
    pages += 1;
  }
  return { items, truncated: next !== null && pages >= maxPages };
}

export function listNamespaces(signal?: AbortSignal) {
  return listAll<Namespace>("/api/namespaces/", { signal });
}

export function createNamespace(body: NamespaceCreate): Promise<Namespace> {
  return request<Namespace>("/api/namespaces/", { method: "POST", body });
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

/** One cursor page: `url` is a first-page path or a `next`/`previous` link. */
export async function getPage<T>(url: string, signal?: AbortSignal): Promise<CursorPage<T>> {
  const path = toApiPath(url);
  const page = await request<CursorPage<T>>(path, { signal });
  if (!page || !Array.isArray(page.results)) {
    throw new ApiError(200, `Unexpected list response from ${path}.`, {}, page);
  }
  return page;
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------------------
// Namespaces

export function getNamespace(name: string, signal?: AbortSignal): Promise<Namespace> {
  return request<Namespace>(`/api/namespaces/${enc(name)}/`, { signal });
}

export function deleteNamespace(name: string, confirm: string): Promise<void> {
  return request<void>(`/api/namespaces/${enc(name)}/`, { method: "DELETE", body: { confirm } });
}

export function getNamespaceSummary(name: string, signal?: AbortSignal): Promise<NamespaceSummary> {
  return request<NamespaceSummary>(`/api/namespaces/${enc(name)}/summary`, { signal });
}

export function syncNamespace(name: string): Promise<SyncResult> {
  return request<SyncResult>(`/api/namespaces/${enc(name)}/sync`, { method: "POST" });
}

export function listActions(signal?: AbortSignal): Promise<ActionInfo[]> {
  return request<ActionInfo[]>("/api/actions", { signal });
}

export function startNamespaceAction(name: string, body: NamespaceActionRequest): Promise<TaskRun> {
  return request<TaskRun>(`/api/namespaces/${enc(name)}/actions`, { method: "POST", body });
}

export function getCompactionEstimate(name: string, signal?: AbortSignal): Promise<CompactionEstimate> {
  return request<CompactionEstimate>(`/api/namespaces/${enc(name)}/compaction-estimate`, { signal });
}

export function browseMessages(name: string, q: MessageQuery, signal?: AbortSignal): Promise<MessagePage> {
  return request<MessagePage>(withQuery(`/api/namespaces/${enc(name)}/messages`, { ...q }), { signal });
}

/** Produce a test message (operator); answers where it landed. */
export function produceMessage(name: string, body: ProduceRequest): Promise<ProduceResult> {
  return request<ProduceResult>(`/api/namespaces/${enc(name)}/messages`, { method: "POST", body });
}

// ---------------------------------------------------------------------------
// Subscriptions

export function listSubscriptions(name: string, signal?: AbortSignal): Promise<SubscriptionList> {
  return request<SubscriptionList>(`/api/namespaces/${enc(name)}/subscriptions`, { signal });
}

export function createSubscription(name: string, body: { name: string; initial: "earliest" | "latest" }): Promise<SubscriptionRow> {
  return request<SubscriptionRow>(`/api/namespaces/${enc(name)}/subscriptions`, { method: "POST", body });
}

export function deleteSubscription(name: string, subscription: string, confirm: string): Promise<void> {
  return request<void>(`/api/namespaces/${enc(name)}/subscriptions/${enc(subscription)}`, {
    method: "DELETE",
    body: { confirm },
  });
}

/** Reset, skip or clear a subscription's cursor (operator; `confirm` repeats its name). */
export function moveSubscriptionCursor(name: string, subscription: string, body: CursorRequest): Promise<CursorResult> {
  return request<CursorResult>(`/api/namespaces/${enc(name)}/subscriptions/${enc(subscription)}/cursor`, {
    method: "POST",
    body,
  });
}

// ---------------------------------------------------------------------------
// Policies

export function policyPath(scope: PolicyScope): string {
  switch (scope.kind) {
    case "cluster":
      return "/api/policies/cluster";
    case "namespace":
      return `/api/namespaces/${enc(scope.name)}/policy`;
    case "node":
      return `/api/nodes/${enc(scope.name)}/policy`;
  }
}

export function getPolicy(scope: PolicyScope, signal?: AbortSignal): Promise<PolicyView> {
  return request<PolicyView>(policyPath(scope), { signal });
}

export function updatePolicy(scope: PolicyScope, body: PolicyChangeRequest): Promise<PolicyView> {
  return request<PolicyView>(policyPath(scope), { method: "PATCH", body });
}

// ---------------------------------------------------------------------------
// Nodes

export async function listNodes(signal?: AbortSignal): Promise<StorageNode[]> {
  const body = await request<StorageNode[] | CursorPage<StorageNode>>("/api/nodes/", { signal });
  // Not paginated today; accept a page too in case that changes.
  return Array.isArray(body) ? body : (body?.results ?? []);
}

export function createNode(body: NodeCreate): Promise<StorageNode> {
  return request<StorageNode>("/api/nodes/", { method: "POST", body });
}

export function updateNode(name: string, body: Partial<NodeCreate>): Promise<StorageNode> {
  return request<StorageNode>(`/api/nodes/${enc(name)}/`, { method: "PATCH", body });
}

export function deleteNode(name: string): Promise<void> {
  return request<void>(`/api/nodes/${enc(name)}/`, { method: "DELETE" });
}

export function startNodeAction(name: string, body: NodeActionRequest): Promise<TaskRun> {
  return request<TaskRun>(`/api/nodes/${enc(name)}/actions`, { method: "POST", body });
}

// ---------------------------------------------------------------------------
// Runs

export function getRun(id: number, signal?: AbortSignal): Promise<TaskRun> {
  return request<TaskRun>(`/api/runs/${id}/`, { signal });
}

export function cancelRun(id: number): Promise<TaskRun> {
  return request<TaskRun>(`/api/runs/${id}/cancel`, { method: "POST" });
}

// Segments, runs, audit entries and alerts are fetched page by page with getPage().

// ---------------------------------------------------------------------------
// Lifecycle reports and Spark jobs

/** The namespace's `days` most recent report days, newest first, with the server's totals over them. */
export function getLifecycleReport(name: string, days: number, signal?: AbortSignal): Promise<LifecycleReport> {
  return request<LifecycleReport>(withQuery(`/api/namespaces/${enc(name)}/reports/lifecycle/summary`, { days }), { signal });
}

/** Start a Spark job (operator); answers the task run to poll. */
export function startSparkJob(body: SparkJobRequest): Promise<TaskRun> {
  return request<TaskRun>("/api/spark-jobs", { method: "POST", body });
}

// ---------------------------------------------------------------------------
// Metrics

export function getMetricsSummary(signal?: AbortSignal): Promise<MetricsSummary> {
  return request<MetricsSummary>("/api/metrics/summary", { signal });
}

export function getMetricSeries(
  params: { series: string; range: MetricRange; namespace?: string; node?: string },
  signal?: AbortSignal,
): Promise<MetricSeries> {
  return request<MetricSeries>(withQuery("/api/metrics/series", params), { signal });
}

// ---------------------------------------------------------------------------
// Alerts

/** Whether alerts fire (the Overview's overall status), with counts. */
export function getAlertStatus(signal?: AbortSignal): Promise<AlertStatus> {
  return request<AlertStatus>("/api/alerts/status", { signal });
}

export function ackAlert(id: number): Promise<Alert> {
  return request<Alert>(`/api/alerts/${id}/ack`, { method: "POST" });
}

export function silenceAlert(id: number, minutes: number): Promise<Alert> {
  return request<Alert>(`/api/alerts/${id}/silence`, { method: "POST", body: { minutes } });
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

export function listAlertRules(signal?: AbortSignal) {
  return listPlainOrPaged<AlertRule>("/api/alert-rules/", signal);
}

export function saveAlertRule(body: AlertRuleInput, id?: number): Promise<AlertRule> {
  return id === undefined
    ? request<AlertRule>("/api/alert-rules/", { method: "POST", body })
    : request<AlertRule>(`/api/alert-rules/${id}/`, { method: "PATCH", body });
}

export function deleteAlertRule(id: number): Promise<void> {
  return request<void>(`/api/alert-rules/${id}/`, { method: "DELETE" });
}

export function listAlertChannels(signal?: AbortSignal) {
  return listPlainOrPaged<AlertChannel>("/api/alert-channels/", signal);
}

export function saveAlertChannel(body: AlertChannelInput, id?: number): Promise<AlertChannel> {
  return id === undefined
    ? request<AlertChannel>("/api/alert-channels/", { method: "POST", body })
    : request<AlertChannel>(`/api/alert-channels/${id}/`, { method: "PATCH", body });
}

export function deleteAlertChannel(id: number): Promise<void> {
  return request<void>(`/api/alert-channels/${id}/`, { method: "DELETE" });
}

/** Turn a rule (a built-in one too) off or on: operators, audited. Off closes its open alerts. */
export function setAlertRuleEnabled(id: number, enabled: boolean): Promise<AlertRule> {
  return request<AlertRule>(`/api/alert-rules/${id}/enabled`, { method: "POST", body: { enabled } });
}

/** Send a test message through a channel now: operators, audited; answers whether it was delivered. */
export function testAlertChannel(id: number): Promise<{ delivered: boolean; error: string }> {
  return request<{ delivered: boolean; error: string }>(`/api/alert-channels/${id}/test`, { method: "POST" });
}
