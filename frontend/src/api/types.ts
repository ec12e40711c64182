// Wire types for the backend REST API (Django REST framework).
// `schema.d.ts` is generated from the OpenAPI schema (`make api-types`; a test fails when it is
// stale); types taken from it are exact by construction. The hand-written ones below are being
// moved onto it; until then the OpenAPI schema is the source of truth when the two disagree.

import type { components } from "./schema";

export type Role = "viewer" | "operator" | "admin";

export interface User {
  username: string;
  role: Role;
}

export interface LoginRequest {
  username: string;
  password: string;
}

export interface CsrfResponse {
  csrftoken: string;
}

/** One component of GET /api/health. Extra keys may appear per component. */
export interface HealthComponent {
  ok: boolean;
  detail: string;
  last_heartbeat?: string | null;
  [extra: string]: unknown;
}

export type HealthStatus = "ok" | "degraded";

export interface Health {
  status: HealthStatus;
  checked_at: string;
  /** database, broker, node, worker, beat, ... — the set may grow. */
  components: Record<string, HealthComponent>;
}

/** DRF cursor pagination envelope. */
export interface CursorPage<T> {
  next: string | null;
  previous: string | null;
  results: T[];
}

export type SyncState = "synced" | "pending" | "failed";

export interface ShardPlacement {
  shard: number;
  node: string;
}

export interface Namespace {
  name: string;
  shards: number;
  node: string | null;
  /** The node hosting each shard (fixed at creation). */
  placement?: ShardPlacement[];
  created_at: string;
  sync_state: SyncState;
  sync_error: string;
  // Present on detail and list rows of the current API; optional so that
  // older fixtures and a freshly created row (POST answer) still type-check.
  updated_at?: string;
  policy_overrides?: Record<string, PolicyValue>;
  stored_bytes?: number;
  stored_records?: number;
  segment_count?: number;
  /** 0–1 */
  expired_ratio?: number;
  last_scan_at?: string | null;
  last_compaction_at?: string | null;
}

export interface NamespaceCreate {
  name: string;
  shards: number;
  policy?: Record<string, PolicyValue>;
  /** Every shard on this node (default: the default node)… */
  node?: string;
  /** …or one node name per shard. */
  placement?: string[];
}

/** A shard's figures as the node reports them (the engine's ShardStats, unchanged) and its backlog. */
export interface ShardSummary {
  shard: number;
  log_start_offset: number;
  end_offset: number;
  record_count: number;
  live_count: number;
  size_bytes: number;
  segment_count: number;
  // Optional: older servers (and fixtures) leave them out.
  expired_records?: number;
  expired_bytes?: number;
  /** 0–1, the node's */
  expired_ratio?: number;
  expired_bytes_ratio?: number;
  /** Summed over the subscriptions on the shard. */
  backlog_messages?: number;
  backlog_live_messages?: number;
  backlog_bytes?: number;
  updated_at: string | null;
  /** The last metrics collection that reported the shard. */
  collected_at?: string | null;
}

/** A namespace's figures: its shards' summed, ratios of the sums (computed by the server, shown as they are). */
export interface NamespaceSummary {
  name: string;
  stored_bytes: number;
  stored_records: number;
  live_records: number;
  expired_records?: number;
  expired_bytes?: number;
  expired_ratio: number;
  expired_bytes_ratio?: number;
  segment_count: number;
  /** Summed over subscriptions and shards; null until a metrics collection has reported every shard. */
  backlog_messages: number | null;
  backlog_live_messages?: number | null;
  /** The oldest shard's last metrics collection. */
  collected_at?: string | null;
  last_scan_at: string | null;
  last_compaction_at: string | null;
  shards: ShardSummary[];
}

export interface SyncResult {
  inserted: number;
  updated: number;
  deleted: number;
  unchanged: number;
}

// ---- Policies --------------------------------------------------------------

/** A policy value; null means "infinite" / not set for nullable fields. */
export type PolicyValue = number | string | boolean | null;

export type PolicySource = "builtin" | "cluster" | "namespace" | "node";

export type PolicyUnit = "ms" | "bytes" | "ratio" | "count" | "bool" | "choice" | "hours";

export interface PolicyField {
  value: PolicyValue;
  source: PolicySource;
  overridden: boolean;
  default: PolicyValue;
  group: string;
  unit: PolicyUnit;
  nullable: boolean;
  choices: string[];
  help: string;
}

export interface PolicyView {
  fields: Record<string, PolicyField>;
  sync_state?: SyncState;
  sync_error?: string;
}

export interface PolicyChangeRequest {
  set: Record<string, PolicyValue>;
  reset: string[];
}

/** Which policy a request is about. */
export type PolicyScope =
  | { kind: "cluster" }
  | { kind: "namespace"; name: string }
  | { kind: "node"; name: string };

// ---- Nodes -----------------------------------------------------------------

export interface StorageNode {
  name: string;
  url: string;
  has_token: boolean;
  healthy: boolean;
  last_seen_at: string | null;
  last_error: string;
  policy_overrides: Record<string, PolicyValue>;
  created_at: string;
}

export interface NodeCreate {
  name: string;
  url: string;
  token: string;
}

// ---- Segments --------------------------------------------------------------

export type SegmentState = "active" | "sealed" | "deleting" | "deleted" | "offloaded";

export interface Segment {
  id: number;
  namespace: string;
  shard: number;
  base_offset: number;
  last_offset: number;
  record_count: number;
  live_count: number;
  size_bytes: number;
  min_timestamp: number | null;
  max_timestamp: number | null;
  max_expire_at: number | null;
  has_unbounded: boolean;
  state: SegmentState;
  created_at_ms: number | null;
  modified_at_ms: number | null;
  expired_records: number;
  expired_bytes: number;
  /** When every record will have expired, namespace TTL included; null when some record never does. */
  deadline: number | null;
  expired_ratio: number;
  synced_at: string | null;
}

// ---- Runs ------------------------------------------------------------------

export type RunState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export interface TaskRun {
  id: number;
  kind: string;
  namespace: string | null;
  node: string | null;
  shard: number | null;
  state: RunState;
  /** 0–1 */
  progress: number;
  steps: number;
  counts: Record<string, number>;
  bytes_reclaimed: number;
  dry_run: boolean;
  params: Record<string, unknown>;
  error: string;
  started_by: string | null;
  schedule: string;
  /** manual: started by someone; scheduled: by a schedule (older servers leave it out). */
  origin?: "manual" | "scheduled";
  cancel_requested: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

// Action kinds come from GET /api/actions (the control plane's one table of them).
export type NamespaceAction = string;
export type NodeAction = string;

// Generated from the OpenAPI schema (src/api/schema.d.ts, `make api-types`): exact by construction.
export type ActionInfo = components["schemas"]["ActionOutput"];

export interface NamespaceActionRequest {
  action: NamespaceAction;
  dry_run: boolean;
  confirm?: string;
}

export interface NodeActionRequest {
  action: NodeAction;
  dry_run?: boolean;
  confirm?: string;
}

export interface CompactionEstimate {
  bytes_before: number;
  bytes_after: number;
  reclaimable_bytes: number;
  records_removable: number;
}

// ---- Audit -----------------------------------------------------------------

export type AuditResult = "ok" | "failed" | "denied";

export interface AuditEntry {
  id: number;
  at: string;
  actor: string;
  action: string;
  target_type: string;
  target: string;
  before: unknown;
  after: unknown;
  diff: Record<string, { before: unknown; after: unknown }> | null;
  result: AuditResult;
  detail: string;
  remote_addr: string | null;
}

// ---- Messages --------------------------------------------------------------

/** A byte string as the message browser shows it. */
export interface Shown {
  text: string | null;
  hex: string | null;
  size: number;
  truncated: boolean;
  tombstone: boolean;
}

export interface MessageRecord {
  /** The shard the record was read from. */
  shard: number;
  offset: number;
  timestamp: number;
  expire_at: number | null;
  /** When the record expires: its own TTL or the namespace's, whichever is first; null: never. */
  effective_expires_at?: number | null;
  key: Shown | null;
  value: Shown;
  tags: string[];
  headers: Record<string, Shown>;
}

export interface MessagePage {
  records: MessageRecord[];
  /** One shard: where the next page starts. */
  next_offset: number | null;
  /** Across shards (by time): `shard:offset` pairs to pass back as `positions`; null when nothing was read. */
  next_positions?: string | null;
  /** The shards asked, in order. */
  shards?: number[];
  /** Key lookup without a shard: the shard placement by key puts the key on. */
  key_shard?: number;
}

export interface MessageQuery {
  /** Absent: a key is looked up in its own shard first, a time searches every shard. */
  shard?: number;
  offset?: number;
  time?: number;
  key?: string;
  tag?: string;
  /** Continue a search across shards (the last page's `next_positions`). */
  positions?: string;
  /** Key lookup without a shard: every shard answers, not only the first that has the key. */
  all_shards?: boolean;
  limit?: number;
  display?: "text" | "hex";
}

/** The 416 body of a read below the log start or past the end. */
export interface OutOfRange {
  detail: string;
  error: "offset_out_of_range";
  shard: number;
  offset: number;
  log_start_offset: number;
  end_offset: number;
  below_log_start: boolean;
}

/** A test message (POST /api/namespaces/<name>/messages, operator). */
export interface ProduceRequest {
  key?: string | null;
  /** null: a tombstone */
  value: string | null;
  tags?: string[];
  headers?: Record<string, string>;
  ttl_ms?: number | null;
  /** Absent: by key (crc32(key) mod shards), keyless round-robin. */
  shard?: number | null;
}

export interface ProduceResult {
  shard: number;
  offset: number;
  node: string;
}

// ---- Subscriptions -----------------------------------------------------------

export interface ShardBacklog {
  shard: number;
  /** Mark-delete position: everything at or below it is acknowledged (-1: nothing). */
  cursor: number;
  end_offset: number;
  /** Offset distance: end_offset − cursor − 1 over stored offsets. */
  messages: number;
  /** Records after the cursor a consumer will actually receive. */
  live_messages: number;
  bytes: number;
  age_ms: number | null;
}

export interface SubscriptionRow {
  name: string;
  initial: "earliest" | "latest" | string;
  created_at: string;
  /** null when no node answered */
  backlog: ShardBacklog[] | null;
  messages: number | null;
  live_messages: number | null;
  bytes: number | null;
  age_ms: number | null;
}

export interface SubscriptionList {
  results: SubscriptionRow[];
  node_error: string;
}

export type CursorAction = "earliest" | "latest" | "time" | "skip" | "clear";

export interface CursorRequest {
  action: CursorAction;
  shard?: number | null;
  timestamp?: number;
  count?: number;
  confirm: string;
}

export interface CursorResult {
  action: CursorAction;
  moves: { shard: number; before: number; after: number }[];
  subscription: SubscriptionRow;
}

// ---- Metrics ---------------------------------------------------------------

export interface Watermarks {
  max_used: number;
  clean_forcibly: number;
  warning: number;
}

/** How the last metrics collection found a node; unknown when none looked at it recently. */
export type NodeHealthState = "healthy" | "unhealthy" | "unknown";

export interface NodeDisk {
  name: string;
  // Health (optional: older servers leave it out).
  health?: NodeHealthState;
  checked_at?: string | null;
  last_seen_at?: string | null;
  error?: string;
  /** null until the node has reported its disk. */
  disk_used_bytes: number | null;
  disk_capacity_bytes: number | null;
  disk_used_ratio: number | null;
  watermarks: Watermarks;
  forecast_warning_at: string | null;
  /** How long the disk samples the forecast fits span; no forecast until forecast_ready. */
  forecast_history_s?: number;
  forecast_ready?: boolean;
}

export interface MetricsSummary {
  stored_bytes: number;
  stored_records: number;
  live_records?: number;
  expired_records?: number;
  expired_ratio: number;
  expired_bytes_ratio?: number;
  backlog_messages: number;
  backlog_live_messages?: number;
  /** The latest collection. */
  collected_at?: string | null;
  forecast_min_history_s?: number;
  nodes: NodeDisk[];
}

export type MetricRange = "1h" | "6h" | "24h" | "7d" | "30d";
export type MetricSeriesName =
  | "expired_ratio"
  | "stored_bytes"
  | "backlog_messages"
  | "backlog_live_messages"
  | "delete_queue_length"
  | "celery_queue_depth"
  | "disk_used_ratio";
export type MetricUnit = "ratio" | "bytes" | "messages" | "count";
export type Point = [number, number];

export interface MetricSeries {
  series: string;
  unit: MetricUnit;
  range?: string;
  step_s: number;
  resolution?: "raw" | "5m";
  /** More lines existed than were sent. */
  truncated?: boolean;
  /** A disk_used_ratio line may carry its node's own watermarks. */
  lines: { labels: Record<string, string>; points: Point[]; watermarks?: Watermarks | null }[];
  watermarks?: Watermarks;
  /** disk_used_ratio: the forecast of one node (empty until its history is long enough). */
  forecast?: Point[];
  forecast_node?: string;
  forecast_history_s?: number;
  forecast_min_history_s?: number;
  /** epoch ms when the forecast reaches the warning watermark; null: not within 7 days (or no forecast). */
  forecast_warning_at?: number | null;
}

// ---- Alerts ----------------------------------------------------------------

export type AlertSeverity = "info" | "warning" | "critical";
export type AlertState = "firing" | "pending" | "resolved";

export interface Alert {
  id: number;
  /** null: the rule was deleted (the alert keeps its name, metric and severity). */
  rule: number | null;
  rule_name: string;
  /** The rule's metric when the alert was open (older servers: absent). */
  metric?: string;
  severity: AlertSeverity;
  state: AlertState;
  scope: string;
  labels?: Record<string, string>;
  value: number | null;
  threshold: number | null;
  started_at: string | null;
  fired_at: string | null;
  resolved_at: string | null;
  acknowledged_by: string | null;
  acknowledged_at: string | null;
  silenced_until: string | null;
  /** Silenced now (silenced_until still ahead): no notifications, the alert still fires. */
  silenced?: boolean;
  summary: string;
}

/** GET /api/alerts/status: "firing" while any alert fires (silenced ones too). */
export interface AlertStatus {
  status: "ok" | "firing";
  firing: number;
  silenced: number;
  acknowledged: number;
  critical: number;
  pending: number;
}

export type Comparator = ">" | ">=" | "<" | "<=";
export type ScopeType = "all" | "namespace" | "shard" | "node";

export interface AlertRule {
  id: number;
  name: string;
  metric: string;
  scope_type: ScopeType;
  scope: string;
  comparator: Comparator;
  threshold: number;
  /** A numeric policy field: the effective threshold is threshold × its value ("" = absolute). */
  threshold_policy?: string;
  for_s: number;
  severity: AlertSeverity;
  channels: number[];
  enabled: boolean;
  description?: string;
  /** One of the default rules (DESIGN §4). */
  builtin?: boolean;
}

export type AlertRuleInput = Omit<AlertRule, "id" | "builtin">;

export interface AlertChannel {
  id: number;
  name: string;
  /** alertmanager: alerts are POSTed to <target>/api/v2/alerts (Alertmanager API v2). */
  kind: "email" | "webhook" | "alertmanager";
  target: string;
  enabled: boolean;
  has_secret?: boolean;
  /** The target is shortened (webhook, Alertmanager: scheme and host; email: domains): only admins see it whole. */
  target_redacted?: boolean;
}

export type AlertChannelInput = Omit<AlertChannel, "id" | "has_secret" | "target_redacted">;

/** POST /api/alert-channels/<id>/test: whether the test message went out; `error` is the server's own words. */
export interface ChannelTestResult {
  delivered: boolean;
  error: string;
}

/** DRF field errors: {"field": ["message", ...], "non_field_errors": [...]}. */
export type FieldErrors = Record<string, string[]>;

// ---- Lifecycle reports and Spark jobs ------------------------------------------

/** Records per lifetime bucket (effective expiry − timestamp; upper bounds inclusive). */
export interface LifetimeHistogram {
  le_1m: number;
  le_1h: number;
  le_1d: number;
  le_7d: number;
  le_30d: number;
  gt_30d: number;
}

/** One day of a namespace's lifecycle report (`python -m spark_jobs lifecycle-report`). */
export interface LifecycleReportRow {
  namespace: string;
  /** UTC day of the records' timestamps, YYYY-MM-DD */
  day: string;
  records: number;
  bytes: number;
  /** expired at the report's "now" but not yet reclaimed */
  expired_records: number;
  expired_bytes: number;
  expired_ratio: number | null;
  expired_bytes_ratio: number | null;
  /** records without any expiry */
  unbounded_records: number;
  lifetime_p50_ms: number | null;
  lifetime_p90_ms: number | null;
  lifetime_p99_ms: number | null;
  lifetime_histogram: LifetimeHistogram;
  /** how long expired records have survived past their expiry */
  overdue_p50_ms: number | null;
  overdue_p90_ms: number | null;
  overdue_p99_ms: number | null;
  overdue_max_ms: number | null;
  keyed_records: number;
  /** not the latest for their key: compaction drops them */
  superseded_records: number;
  /** what compaction would reclaim */
  superseded_bytes: number;
  duplicate_key_ratio: number | null;
  now_ms: number;
  generated_at: string;
  received_at: string;
}

/** A namespace's report days taken together, as the control plane adds them up (sums; ratios of the sums). */
export interface LifecycleReportTotals {
  /** report days summed (at most the days asked for) */
  days: number;
  first_day: string | null;
  last_day: string | null;
  records: number;
  bytes: number;
  expired_records: number;
  expired_bytes: number;
  /** expired ÷ stored records over the days (weighted by records); null without records */
  expired_ratio: number | null;
  expired_bytes_ratio: number | null;
  unbounded_records: number;
  keyed_records: number;
  superseded_records: number;
  /** what compaction would reclaim */
  superseded_bytes: number;
  /** superseded ÷ keyed records over the days; null without keyed records */
  duplicate_key_ratio: number | null;
  /** the days' histograms added up per bucket */
  lifetime_histogram: LifetimeHistogram;
  /** each bucket's share of the records that have an expiry; null when none has */
  lifetime_shares: Record<keyof LifetimeHistogram, number | null>;
}

/** GET /api/namespaces/<name>/reports/lifecycle/summary: the rows and their totals, from one read. */
export interface LifecycleReport {
  namespace: string;
  /** newest first */
  rows: LifecycleReportRow[];
  totals: LifecycleReportTotals;
}

export interface SparkJobRequest {
  job: string;
  namespace?: string | null;
  /** ttl-backfill: `tag` or `key_prefix`, and `ttl` (e.g. 7d). */
  params?: Record<string, string>;
}
