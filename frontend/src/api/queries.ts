// TanStack Query hooks and keys. Pages use these, never fetch directly: every call is one `api.GET`,
// `api.POST`, … of the generated client (./client.ts), typed by the OpenAPI schema.

import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { samePlaceholder } from "../features/messages/messages";
import { answer, api, acceptStatus, ApiError, confirmBody, getCsrfToken, getPage, listPaged, resetCsrfToken, rowsOf } from "./client";
import type {
  AlertChannelInput,
  Health,
  StorageNode,
  AlertRuleInput,
  CursorPage,
  CursorRequest,
  LoginRequest,
  MessageQuery,
  MetricRange,
  MetricSeriesName,
  Namespace,
  NamespaceActionRequest,
  NamespaceCreate,
  NamespaceListRow,
  NodeActionRequest,
  NodeCreate,
  PolicyChangeRequest,
  PolicyScope,
  PolicyView,
  ProduceRequest,
  SparkJobRequest,
  TaskRun,
  User,
} from "./types";

export const queryKeys = {
  me: ["auth", "me"] as const,
  actions: ["actions"] as const,
  health: ["health"] as const,
  namespaces: ["namespaces", "list"] as const,
  namespace: (name: string) => ["namespaces", "detail", name] as const,
  namespaceSummary: (name: string) => ["namespaces", "summary", name] as const,
  compactionEstimate: (name: string) => ["namespaces", "compaction-estimate", name] as const,
  policy: (scope: PolicyScope) => ["policy", scope.kind, scope.kind === "cluster" ? "" : scope.name] as const,
  nodes: ["nodes"] as const,
  /** Any cursor-paginated list; the URL (filters + cursor) is the rest of the key. */
  page: (kind: string, url: string) => ["page", kind, url] as const,
  messages: (name: string, q: MessageQuery) => ["messages", name, q] as const,
  metricsSummary: ["metrics", "summary"] as const,
  metricSeries: (series: string, range: MetricRange, extra: Record<string, string | undefined>) =>
    ["metrics", "series", series, range, extra] as const,
  alertRules: ["alert-rules"] as const,
  alertStatus: ["alerts", "status"] as const,
  alertChannels: ["alert-channels"] as const,
  lifecycleReport: (name: string, days: number) => ["reports", "lifecycle", name, days] as const,
  run: (id: number) => ["runs", "detail", id] as const,
  subscriptions: (name: string) => ["namespaces", "subscriptions", name] as const,
};

/** Active runs are polled this often. */
export const RUN_POLL_MS = 2_000;
/** The overview refreshes metrics this often when auto-refresh is on. */
export const METRICS_REFRESH_MS = 30_000;

export const HEALTH_REFRESH_MS = 5_000;

/** Figures (namespaces, shards, segments, nodes) are refreshed by the server every metrics interval
 * (METRICS_INTERVAL_S, 15 s by default); pages showing them poll as often. */
export const FIGURES_REFRESH_MS = 15_000;

type Polling = { refetchInterval?: number | false };

// ---- Calls with logic of their own --------------------------------------------

/** The logged-in user, or null when not logged in (401/403). */
export async function getMe(signal?: AbortSignal): Promise<User | null> {
  try {
    return await answer(api.GET("/api/auth/me", { signal }));
  } catch (err) {
    if (err instanceof ApiError && err.isUnauthenticated) return null;
    throw err;
  }
}

export async function login(credentials: LoginRequest): Promise<User> {
  // Always start from a fresh token: this also sets the cookie.
  await getCsrfToken(true);
  const user = await answer(api.POST("/api/auth/login", { body: credentials }));
  resetCsrfToken(); // Django rotates the token at login.
  return user;
}

export async function logout(): Promise<void> {
  try {
    await api.POST("/api/auth/logout");
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
  const { data, error } = await api.GET("/api/health", { signal, middleware: [acceptStatus(503)] });
  const body: unknown = data ?? error;
  if (!isHealth(body)) {
    throw new ApiError(503, "The health endpoint answered without component data.", {}, body);
  }
  return body;
}

/** The storage nodes: not paginated today (the schema says an array); a page is accepted too. */
async function listNodes(signal?: AbortSignal): Promise<StorageNode[]> {
  const body = (await answer(api.GET("/api/nodes/", { signal }))) as StorageNode[] | CursorPage<StorageNode>;
  return (await rowsOf(body, "/api/nodes/", signal)).items;
}

function getPolicy(scope: PolicyScope, signal?: AbortSignal): Promise<PolicyView> {
  switch (scope.kind) {
    case "cluster":
      return answer(api.GET("/api/policies/cluster", { signal }));
    case "namespace":
      return answer(api.GET("/api/namespaces/{name}/policy", { params: { path: { name: scope.name } }, signal }));
    case "node":
      return answer(api.GET("/api/nodes/{name}/policy", { params: { path: { name: scope.name } }, signal }));
  }
}

function updatePolicy(scope: PolicyScope, body: PolicyChangeRequest): Promise<PolicyView> {
  switch (scope.kind) {
    case "cluster":
      return answer(api.PATCH("/api/policies/cluster", { body }));
    case "namespace":
      return answer(api.PATCH("/api/namespaces/{name}/policy", { params: { path: { name: scope.name } }, body }));
    case "node":
      return answer(api.PATCH("/api/nodes/{name}/policy", { params: { path: { name: scope.name } }, body }));
  }
}

export function useMe() {
  return useQuery({
    queryKey: queryKeys.me,
    queryFn: ({ signal }) => getMe(signal),
    staleTime: 60_000,
    retry: 1,
  });
}

export function useHealth(options: { refetchInterval?: number | false } = {}) {
  return useQuery({
    queryKey: queryKeys.health,
    queryFn: ({ signal }) => getHealth(signal),
    refetchInterval: options.refetchInterval ?? HEALTH_REFRESH_MS,
    // Keep polling in a background tab? No: operators look at it when visible.
    refetchIntervalInBackground: false,
    retry: false,
  });
}

export function useLogin() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (credentials: LoginRequest) => login(credentials),
    onSuccess: (user: User) => {
      qc.setQueryData(queryKeys.me, user);
    },
  });
}

export function useLogout() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => logout(),
    onSuccess: () => {
      // Drop everything cached for the previous user.
      qc.removeQueries({ predicate: (q) => q.queryKey[0] !== "health" });
      qc.setQueryData(queryKeys.me, null);
    },
  });
}

export function useNamespaces(options: Polling = {}) {
  return useQuery({
    queryKey: queryKeys.namespaces,
    queryFn: ({ signal }) => listPaged("/api/namespaces/", { signal }),
    refetchInterval: options.refetchInterval ?? false,
    refetchIntervalInBackground: false,
  });
}

export function useCreateNamespace() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: NamespaceCreate) => answer(api.POST("/api/namespaces/", { body })),
    onSuccess: (created: Namespace) => {
      // Show the new row at once (a new namespace stores nothing yet), then reconcile with the server.
      qc.setQueryData<{ items: NamespaceListRow[]; truncated: boolean }>(queryKeys.namespaces, (old) => {
        if (!old) return old;
        if (old.items.some((n) => n.name === created.name)) return old;
        const row: NamespaceListRow = {
          ...created,
          stored_bytes: 0,
          stored_records: 0,
          segment_count: 0,
          local_bytes: 0,
          remote_only_bytes: 0,
          expired_ratio: 0,
          last_scan_at: null,
          last_compaction_at: null,
        };
        return { ...old, items: [...old.items, row] };
      });
      void qc.invalidateQueries({ queryKey: queryKeys.namespaces });
    },
  });
}

export function useNamespace(name: string) {
  return useQuery({
    queryKey: queryKeys.namespace(name),
    queryFn: ({ signal }) => answer(api.GET("/api/namespaces/{name}/", { params: { path: { name } }, signal })),
  });
}

export function useNamespaceSummary(name: string, options: Polling = {}) {
  return useQuery({
    queryKey: queryKeys.namespaceSummary(name),
    queryFn: ({ signal }) => answer(api.GET("/api/namespaces/{name}/summary", { params: { path: { name } }, signal })),
    refetchInterval: options.refetchInterval ?? false,
    refetchIntervalInBackground: false,
  });
}

export function useDeleteNamespace() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ name, confirm }: { name: string; confirm: string }) =>
      answer(api.DELETE("/api/namespaces/{name}/", { params: { path: { name } }, body: confirmBody(confirm) })),
    onSuccess: (_r, { name }) => {
      qc.removeQueries({ queryKey: queryKeys.namespace(name) });
      void qc.invalidateQueries({ queryKey: queryKeys.namespaces });
    },
  });
}

export function useSyncNamespace(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => answer(api.POST("/api/namespaces/{name}/sync", { params: { path: { name } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: queryKeys.namespaceSummary(name) });
      void qc.invalidateQueries({ queryKey: ["page", "segments"] });
    },
  });
}

/** The lifecycle actions the control plane offers (they change only with a new version). */
export function useActions() {
  return useQuery({ queryKey: queryKeys.actions, queryFn: ({ signal }) => answer(api.GET("/api/actions", { signal })), staleTime: Infinity });
}

export function useCompactionEstimate(name: string, enabled: boolean) {
  return useQuery({
    queryKey: queryKeys.compactionEstimate(name),
    queryFn: ({ signal }) => answer(api.GET("/api/namespaces/{name}/compaction-estimate", { params: { path: { name } }, signal })),
    enabled,
    staleTime: 0,
  });
}

export function useNamespaceAction(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: NamespaceActionRequest) => answer(api.POST("/api/namespaces/{name}/actions", { params: { path: { name } }, body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["page", "runs"] }),
  });
}

export function useNodeAction(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: NodeActionRequest) => answer(api.POST("/api/nodes/{name}/actions", { params: { path: { name } }, body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["page", "runs"] }),
  });
}

// ---- Policies --------------------------------------------------------------

export function usePolicy(scope: PolicyScope) {
  return useQuery({
    queryKey: queryKeys.policy(scope),
    queryFn: ({ signal }) => getPolicy(scope, signal),
    // A change the node has not taken yet: look again until it has.
    refetchInterval: (q) => (q.state.data?.sync_state === "pending" ? 5_000 : false),
  });
}

export function useUpdatePolicy(scope: PolicyScope) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: PolicyChangeRequest) => updatePolicy(scope, body),
    onSuccess: (view: PolicyView) => {
      qc.setQueryData(queryKeys.policy(scope), view);
      // Namespace policies inherit from the cluster policy.
      if (scope.kind === "cluster") void qc.invalidateQueries({ queryKey: ["policy", "namespace"] });
      if (scope.kind === "namespace") void qc.invalidateQueries({ queryKey: queryKeys.namespace(scope.name) });
      if (scope.kind === "node") void qc.invalidateQueries({ queryKey: queryKeys.nodes });
    },
  });
}

// ---- Nodes -----------------------------------------------------------------

export function useNodes(options: Polling = {}) {
  return useQuery({
    queryKey: queryKeys.nodes,
    queryFn: ({ signal }) => listNodes(signal),
    refetchInterval: options.refetchInterval ?? false,
    refetchIntervalInBackground: false,
  });
}

export function useCreateNode() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: NodeCreate) => answer(api.POST("/api/nodes/", { body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.nodes }),
  });
}

export function useDeleteNode() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (name: string) => answer(api.DELETE("/api/nodes/{name}/", { params: { path: { name } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.nodes }),
  });
}

// ---- Cursor pages (segments, runs, audit, alerts) ---------------------------

/**
 * One page of a cursor-paginated list. `url` is the first-page URL with the
 * filters, or a next/previous link; the previous page stays on screen while
 * the next one loads. Never fetches more than the page asked for.
 */
export function useCursorPage<T>(
  kind: string,
  url: string,
  options: { refetchInterval?: number | false | ((page: CursorPage<T> | undefined) => number | false); enabled?: boolean } = {},
) {
  const { refetchInterval } = options;
  return useQuery({
    queryKey: queryKeys.page(kind, url),
    queryFn: ({ signal }) => getPage<T>(url, signal),
    placeholderData: keepPreviousData,
    enabled: options.enabled ?? true,
    refetchInterval:
      typeof refetchInterval === "function" ? (q) => refetchInterval(q.state.data) : refetchInterval,
  });
}

export const isActiveRun = (run: Pick<TaskRun, "state">) => run.state === "queued" || run.state === "running";

/** A page of runs; polled every 2 s while any run on it is queued or running. */
export function useRunsPage(url: string) {
  return useCursorPage<TaskRun>("runs", url, {
    refetchInterval: (page) => (page?.results.some(isActiveRun) ? RUN_POLL_MS : false),
  });
}

/** One run, polled every 2 s while it is queued or running. */
export function useRun(id: number | null) {
  return useQuery({
    queryKey: queryKeys.run(id ?? 0),
    queryFn: ({ signal }) => answer(api.GET("/api/runs/{id}/", { params: { path: { id: id! } }, signal })),
    enabled: id !== null,
    refetchInterval: (q) => (q.state.status === "error" || (q.state.data && !isActiveRun(q.state.data)) ? false : RUN_POLL_MS),
  });
}

export function useCancelRun() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => answer(api.POST("/api/runs/{id}/cancel", { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["page", "runs"] }),
  });
}

// ---- Messages --------------------------------------------------------------

export function useMessages(name: string, q: MessageQuery | null) {
  return useQuery({
    queryKey: queryKeys.messages(name, q ?? {}),
    queryFn: ({ signal }) => answer(api.GET("/api/namespaces/{name}/messages", { params: { path: { name }, query: q! }, signal })),
    enabled: !!name && q !== null,
    placeholderData: samePlaceholder(name),
    staleTime: 30_000,
  });
}

/** Produce a test message; the message browser's cached pages of that namespace go stale. */
export function useProduceMessage(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: ProduceRequest) => answer(api.POST("/api/namespaces/{name}/messages", { params: { path: { name } }, body })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["messages", name] });
      void qc.invalidateQueries({ queryKey: queryKeys.subscriptions(name) });
    },
  });
}

// ---- Subscriptions ---------------------------------------------------------

/** A namespace's subscriptions with live backlog; refreshed every 10 s while shown. */
export function useSubscriptions(name: string) {
  return useQuery({
    queryKey: queryKeys.subscriptions(name),
    queryFn: ({ signal }) => answer(api.GET("/api/namespaces/{name}/subscriptions", { params: { path: { name } }, signal })),
    refetchInterval: 10_000,
  });
}

export function useCreateSubscription(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; initial: "earliest" | "latest" }) =>
      answer(api.POST("/api/namespaces/{name}/subscriptions", { params: { path: { name } }, body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.subscriptions(name) }),
  });
}

export function useDeleteSubscription(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ subscription, confirm }: { subscription: string; confirm: string }) =>
      answer(
        api.DELETE("/api/namespaces/{name}/subscriptions/{subscription}", {
          params: { path: { name, subscription } },
          body: confirmBody(confirm),
        }),
      ),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.subscriptions(name) }),
  });
}

export function useMoveCursor(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ subscription, body }: { subscription: string; body: CursorRequest }) =>
      answer(api.POST("/api/namespaces/{name}/subscriptions/{subscription}/cursor", { params: { path: { name, subscription } }, body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.subscriptions(name) }),
  });
}

// ---- Metrics ---------------------------------------------------------------

export function useMetricsSummary(options: { refetchInterval?: number | false } = {}) {
  return useQuery({
    queryKey: queryKeys.metricsSummary,
    queryFn: ({ signal }) => answer(api.GET("/api/metrics/summary", { signal })),
    refetchInterval: options.refetchInterval ?? false,
    refetchIntervalInBackground: false,
  });
}

/** Whether alerts fire, for the Overview's overall status. */
export function useAlertStatus(options: Polling = {}) {
  return useQuery({
    queryKey: queryKeys.alertStatus,
    queryFn: ({ signal }) => answer(api.GET("/api/alerts/status", { signal })),
    refetchInterval: options.refetchInterval ?? false,
    refetchIntervalInBackground: false,
  });
}

export function useMetricSeries(
  series: MetricSeriesName,
  range: MetricRange,
  options: { namespace?: string; node?: string; refetchInterval?: number | false; enabled?: boolean } = {},
) {
  const { namespace, node, refetchInterval, enabled } = options;
  return useQuery({
    queryKey: queryKeys.metricSeries(series, range, { namespace, node }),
    queryFn: ({ signal }) => answer(api.GET("/api/metrics/series", { params: { query: { series, range, namespace, node } }, signal })),
    enabled: enabled ?? true,
    refetchInterval: refetchInterval ?? false,
    refetchIntervalInBackground: false,
    placeholderData: keepPreviousData,
  });
}

// ---- Alerts ----------------------------------------------------------------

export function useAckAlert() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => answer(api.POST("/api/alerts/{id}/ack", { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["page", "alerts"] }),
  });
}

export function useSilenceAlert() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, minutes }: { id: number; minutes: number }) =>
      answer(api.POST("/api/alerts/{id}/silence", { params: { path: { id } }, body: { minutes } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["page", "alerts"] });
      void qc.invalidateQueries({ queryKey: queryKeys.alertStatus });
    },
  });
}

export function useAlertRules() {
  return useQuery({ queryKey: queryKeys.alertRules, queryFn: async ({ signal }) => rowsOf(await answer(api.GET("/api/alert-rules/", { signal })), "/api/alert-rules/", signal),
  });
}

export function useSaveAlertRule() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ body, id }: { body: AlertRuleInput; id?: number }) =>
      answer(
        id === undefined
          ? api.POST("/api/alert-rules/", { body })
          : api.PATCH("/api/alert-rules/{id}/", { params: { path: { id } }, body }),
      ),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.alertRules }),
  });
}

export function useDeleteAlertRule() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => answer(api.DELETE("/api/alert-rules/{id}/", { params: { path: { id } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: queryKeys.alertRules });
      void qc.invalidateQueries({ queryKey: ["page", "alerts"] }); // its open alerts closed
      void qc.invalidateQueries({ queryKey: queryKeys.alertStatus });
    },
  });
}

/** Turn a rule off or on (operators); off closes its open alerts, so the alert lists refresh too. */
export function useSetAlertRuleEnabled() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, enabled }: { id: number; enabled: boolean }) =>
      answer(api.POST("/api/alert-rules/{id}/enabled", { params: { path: { id } }, body: { enabled } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: queryKeys.alertRules });
      void qc.invalidateQueries({ queryKey: ["page", "alerts"] });
      void qc.invalidateQueries({ queryKey: queryKeys.alertStatus });
    },
  });
}

/** Send a test message through a channel (operators). */
export function useTestAlertChannel() {
  return useMutation({ mutationFn: (id: number) => answer(api.POST("/api/alert-channels/{id}/test", { params: { path: { id } } })) });
}

export function useAlertChannels() {
  return useQuery({ queryKey: queryKeys.alertChannels, queryFn: async ({ signal }) => rowsOf(await answer(api.GET("/api/alert-channels/", { signal })), "/api/alert-channels/", signal),
  });
}

export function useSaveAlertChannel() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ body, id }: { body: AlertChannelInput; id?: number }) =>
      answer(
        id === undefined
          ? api.POST("/api/alert-channels/", { body })
          : api.PATCH("/api/alert-channels/{id}/", { params: { path: { id } }, body }),
      ),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.alertChannels }),
  });
}

export function useDeleteAlertChannel() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => answer(api.DELETE("/api/alert-channels/{id}/", { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: queryKeys.alertChannels }),
  });
}

// ---- Lifecycle reports and Spark jobs ----------------------------------------

export function useLifecycleReport(name: string, days: number) {
  return useQuery({
    queryKey: queryKeys.lifecycleReport(name, days),
    queryFn: ({ signal }) =>
      answer(api.GET("/api/namespaces/{name}/reports/lifecycle/summary", { params: { path: { name }, query: { days } }, signal })),
    placeholderData: keepPreviousData,
  });
}

export function useStartSparkJob() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: SparkJobRequest) => answer(api.POST("/api/spark-jobs", { body })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["page", "runs"] }),
  });
}
