// Wire types for the backend REST API (Django REST framework).
// Keep these in step with the backend serializers; the OpenAPI schema is the
// source of truth when the two disagree.

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

export interface Namespace {
  name: string;
  shards: number;
  node: string | null;
  created_at: string;
  sync_state: SyncState;
  sync_error: string;
}

export interface NamespaceCreate {
  name: string;
  shards: number;
}

/** DRF field errors: {"field": ["message", ...], "non_field_errors": [...]}. */
export type FieldErrors = Record<string, string[]>;
