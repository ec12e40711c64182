// Wire types for the backend REST API (Django REST framework), taken from the OpenAPI schema.
// `schema.d.ts` is generated from it (`make api-types`: manage.py spectacular → openapi-typescript; a
// test fails when it is stale), so every type below that aliases `components["schemas"]` or `paths`
// is exact by construction: a serializer change shows up here, and tsc finds the UI code it breaks.
// The few types written by hand are not wire types (or not in the schema) and say why.

import type { components, paths } from "./schema";

type Schemas = components["schemas"];

/** The JSON query parameters of `GET path` in the schema. */
type QueryOf<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;

// ---- Auth and health -------------------------------------------------------

export type Role = Schemas["RoleEnum"];
export type User = Schemas["MeOutput"];
export type LoginRequest = Schemas["LoginInputRequest"];
export type CsrfResponse = Schemas["CsrfOutput"];

/** One component of GET /api/health (database, broker, node, worker, beat, …). */
export type HealthComponent = Schemas["ComponentHealth"];
export type HealthStatus = Schemas["HealthOutputStatusEnum"];
export type Health = Schemas["HealthOutput"];

/**
 * DRF cursor pagination envelope of any list. The schema has one per list (`PaginatedXList`, all
 * alike); this is that shape over any row type, for the pager and `listAll` (`next` and `previous`
 * stay optional, as the schema has them, though the server always sends them, null at the ends).
 */
export type CursorPage<T> = Omit<Schemas["PaginatedTaskRunOutputList"], "results"> & { results: T[] };

// ---- Namespaces ------------------------------------------------------------

export type SyncState = Schemas["SyncStateEnum"];
export type ShardPlacement = Schemas["ShardPlacement"];
/** A namespace as GET /api/namespaces/<name>/ and the create answer it. */
export type Namespace = Schemas["NamespaceOutput"];
/** A row of GET /api/namespaces/: the namespace with its usage from the catalog. */
export type NamespaceListRow = Schemas["NamespaceListOutput"];
export type NamespaceCreate = Schemas["NamespaceInputRequest"];
/** A shard's figures as the node reports them (the engine's ShardStats, unchanged) and its backlog. */
export type ShardSummary = Schemas["ShardStatusOutput"];
/** A namespace's figures: its shards' summed, ratios of the sums (computed by the server, shown as they are). */
export type NamespaceSummary = Schemas["NamespaceSummaryOutput"];
export type SyncResult = Schemas["SyncResultOutput"];

/**
 * The body of a DELETE that is confirmed by repeating a name (a namespace, a subscription). Written
 * here: drf-spectacular documents no DELETE request body (OpenAPI 3.0 gives one no defined meaning).
 */
export interface DeleteConfirm {
  confirm: string;
}

// ---- Policies --------------------------------------------------------------

/** A policy field as a policy view shows it. */
export type PolicyField = Schemas["PolicyField"];
/** A policy value; null means "infinite" / not set for nullable fields. */
export type PolicyValue = PolicyField["value"];
export type PolicySource = Schemas["PolicySourceEnum"];
export type PolicyUnit = Schemas["PolicyUnitEnum"];
export type PolicyView = Schemas["PolicyOutput"];
export type PolicyChangeRequest = Schemas["PatchedPolicyChangeInputRequest"];

/** Which policy a request is about (UI-only: it picks the path). */
export type PolicyScope =
  | { kind: "cluster" }
  | { kind: "namespace"; name: string }
  | { kind: "node"; name: string };

// ---- Nodes -----------------------------------------------------------------

export type StorageNode = Schemas["NodeOutput"];
export type NodeCreate = Schemas["NodeInputRequest"];
export type NodeUpdate = Schemas["PatchedNodeInputRequest"];

// ---- Segments --------------------------------------------------------------

export type SegmentState = Schemas["SegmentStateEnum"];
export type Segment = Schemas["SegmentOutput"];
/** Where a segment's bytes are (tiered storage): local, both (local and in the object store) or remote. */
export type SegmentTier = Schemas["SegmentTierEnum"];

// ---- Runs and actions ------------------------------------------------------

export type RunState = Schemas["RunStateEnum"];
export type TaskRun = Schemas["TaskRunOutput"];

/** Every lifecycle action (GET /api/actions, the control plane's one table of them). */
export type ActionInfo = Schemas["ActionOutput"];
export type NamespaceAction = Schemas["NamespaceActionInputActionEnum"];
export type NodeAction = Schemas["NodeActionInputActionEnum"];
export type NamespaceActionRequest = Schemas["NamespaceActionInputRequest"];
export type NodeActionRequest = Schemas["NodeActionInputRequest"];
export type CompactionEstimate = Schemas["CompactionEstimateOutput"];

// ---- Audit -----------------------------------------------------------------

export type AuditResult = Schemas["AuditResultEnum"];
export type AuditEntry = Schemas["AuditEntryOutput"];

// ---- Messages --------------------------------------------------------------

/** A byte string as the message browser shows it. */
export type Shown = Schemas["ShownBytes"];
export type MessageRecord = Schemas["Message"];
export type MessagePage = Schemas["BrowseOutput"];
export type MessageQuery = QueryOf<"/api/namespaces/{name}/messages">;
/** The 416 body of a read below the log start or past the end. */
export type OutOfRange = Schemas["OutOfRange"];
/** A test message (POST /api/namespaces/<name>/messages, operator). */
export type ProduceRequest = Schemas["ProduceInputRequest"];
export type ProduceResult = Schemas["ProduceOutput"];

// ---- Subscriptions -----------------------------------------------------------

export type ShardBacklog = Schemas["ShardBacklog"];
export type SubscriptionRow = Schemas["SubscriptionRow"];
export type SubscriptionList = Schemas["SubscriptionRows"];
export type SubscriptionCreate = Schemas["SubscriptionInputRequest"];
export type CursorAction = Schemas["CursorActionEnum"];
export type CursorRequest = Schemas["CursorInputRequest"];
export type CursorResult = Schemas["CursorOutput"];

// ---- Metrics ---------------------------------------------------------------

export type Watermarks = Schemas["WatermarksOutput"];
/** How the last metrics collection found a node; unknown when none looked at it recently. */
export type NodeHealthState = Schemas["HealthEnum"];
export type NodeDisk = Schemas["NodeSummaryOutput"];
export type MetricsSummary = Schemas["SummaryOutput"];
export type MetricRange = NonNullable<QueryOf<"/api/metrics/series">["range"]>;
export type MetricSeriesName = QueryOf<"/api/metrics/series">["series"];
export type MetricUnit = Schemas["SeriesOutputUnitEnum"];

export type MetricSeries = Schemas["SeriesOutput"];
/** `[epoch_ms, value]`. */
export type Point = Schemas["SeriesLineOutput"]["points"][number];

// ---- Alerts ----------------------------------------------------------------

export type AlertSeverity = Schemas["SeverityEnum"];
export type AlertState = Schemas["AlertStateEnum"];
export type Alert = Schemas["AlertOutput"];
/** GET /api/alerts/status: "firing" while any alert fires (silenced ones too). */
export type AlertStatus = Schemas["AlertStatusOutput"];
export type Comparator = Schemas["ComparatorEnum"];
export type ScopeType = Schemas["ScopeTypeEnum"];
export type AlertMetric = Schemas["MetricEnum"];
export type AlertRule = Schemas["AlertRuleOutput"];
export type AlertRuleInput = Schemas["AlertRuleInputRequest"];
export type AlertChannel = Schemas["ChannelOutput"];
export type AlertChannelInput = Schemas["ChannelInputRequest"];
/** POST /api/alert-channels/<id>/test: whether the test message went out; `error` is the server's own words. */
export type ChannelTestResult = Schemas["ChannelTestOutput"];

/**
 * DRF field errors as the client flattens them: {"field": ["message", ...], "non_field_errors": [...]}.
 * Not a wire type (the client builds it from any error body).
 */
export type FieldErrors = Record<string, string[]>;

// ---- Lifecycle reports and Spark jobs ------------------------------------------

/** Records per lifetime bucket (effective expiry − timestamp; upper bounds inclusive). */
export type LifetimeHistogram = Schemas["LifetimeHistogram"];
/** One day of a namespace's lifecycle report (`python -m spark_jobs lifecycle-report`). */
export type LifecycleReportRow = Schemas["LifecycleReportRowOutput"];
/** A namespace's report days taken together, as the control plane adds them up (sums; ratios of the sums). */
export type LifecycleReportTotals = Schemas["LifecycleReportTotals"];
/** GET /api/namespaces/<name>/reports/lifecycle/summary: the rows and their totals, from one read. */
export type LifecycleReport = Schemas["LifecycleReportOutput"];
export type SparkJobRequest = Schemas["SparkJobInputRequest"];
