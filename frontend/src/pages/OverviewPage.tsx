import { errorMessage } from "../api/client";
import { HEALTH_REFRESH_MS, useHealth } from "../api/queries";
import type { HealthComponent } from "../api/types";
import { Badge, ErrorState, LoadingState } from "../components/States";
import { formatDateTime, formatDuration, formatRelativeTime, toDate } from "../lib/format";
import { useNow, usePageTitle } from "../lib/hooks";

/** Known components first, in this order; any others follow alphabetically. */
const COMPONENT_ORDER = ["database", "broker", "node", "worker", "beat"];

const COMPONENT_LABELS: Record<string, string> = {
  database: "Database",
  broker: "Broker (Redis)",
  node: "Storage node",
  worker: "Celery worker",
  beat: "Celery beat",
};

function sortComponents(names: string[]): string[] {
  const rank = (n: string) => {
    const i = COMPONENT_ORDER.indexOf(n);
    return i < 0 ? COMPONENT_ORDER.length : i;
  };
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function labelFor(name: string): string {
  return COMPONENT_LABELS[name] ?? name.replace(/[_-]+/g, " ").replace(/^\w/, (c) => c.toUpperCase());
}

export function OverviewPage() {
  usePageTitle("Overview");
  const health = useHealth();
  const now = useNow(1000);

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>System health</h1>
          <p className="muted">
            Control plane and lifecycle services. Refreshes every {formatDuration(HEALTH_REFRESH_MS)}.
          </p>
        </div>
        {health.data && (
          <div className="overall" aria-live="polite">
            <span className="overall-label">Overall</span>
            <Badge tone={health.data.status === "ok" ? "ok" : "fail"} testId="health-status">
              {health.data.status === "ok" ? "✓ " : "! "}
              {health.data.status}
            </Badge>
          </div>
        )}
      </div>

      {health.isPending && <LoadingState label="Checking system health…" />}

      {health.isError && !health.data && (
        <ErrorState
          title="Could not load system health"
          error={health.error}
          onRetry={() => void health.refetch()}
          retrying={health.isFetching}
        />
      )}

      {health.data && (
        <>
          <p className="meta-line">
            Checked {formatRelativeTime(health.data.checked_at, now)}
            <span className="muted"> · {formatDateTime(health.data.checked_at)}</span>
            <button
              type="button"
              className="link-button"
              onClick={() => void health.refetch()}
              disabled={health.isFetching}
            >
              {health.isFetching ? "Refreshing…" : "Refresh now"}
            </button>
          </p>
          {health.isError && (
            <div className="banner banner-warn" role="alert">
              Could not refresh: {errorMessage(health.error)} Showing the last result from{" "}
              {formatRelativeTime(health.dataUpdatedAt, now)}.
            </div>
          )}
          {Object.keys(health.data.components).length === 0 ? (
            <p className="muted">The health endpoint reported no components.</p>
          ) : (
            <div className="card-grid">
              {sortComponents(Object.keys(health.data.components)).map((name) => (
                <ComponentCard key={name} name={name} component={health.data.components[name]!} now={now} />
              ))}
            </div>
          )}
        </>
      )}
    </div>
  );
}

function ComponentCard({ name, component, now }: { name: string; component: HealthComponent; now: number }) {
  const ok = component.ok === true;
  const { ok: _ok, detail, last_heartbeat: lastHeartbeat, ...extra } = component;
  const hasHeartbeat = name === "beat" || "last_heartbeat" in component;
  const headingId = `health-${name}-title`;
  return (
    <article
      className={`card health-card ${ok ? "is-ok" : "is-fail"}`}
      data-testid={`health-${name}`}
      data-ok={ok ? "true" : "false"}
      aria-labelledby={headingId}
    >
      <div className="card-head">
        <h2 id={headingId}>{labelFor(name)}</h2>
        <Badge tone={ok ? "ok" : "fail"}>{ok ? "✓ OK" : "✕ FAIL"}</Badge>
      </div>
      <p className="card-detail">{detail ? String(detail) : <span className="muted">No detail reported.</span>}</p>
      {hasHeartbeat && (
        <p className="card-meta">
          Last heartbeat:{" "}
          {toDate(lastHeartbeat as string | null | undefined) ? (
            <time dateTime={String(lastHeartbeat)} title={String(lastHeartbeat)}>
              {formatDateTime(lastHeartbeat as string)} ({formatRelativeTime(lastHeartbeat as string, now)})
            </time>
          ) : (
            <span className="muted">never</span>
          )}
        </p>
      )}
      <ExtraFields fields={extra} now={now} />
    </article>
  );
}

/** Any further keys a component reports, shown as-is (times formatted). */
function ExtraFields({ fields, now }: { fields: Record<string, unknown>; now: number }) {
  const entries = Object.entries(fields).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return null;
  return (
    <dl className="card-extra">
      {entries.map(([key, value]) => (
        <div key={key}>
          <dt>{key.replace(/_/g, " ")}</dt>
          <dd>{renderValue(key, value, now)}</dd>
        </div>
      ))}
    </dl>
  );
}

function renderValue(key: string, value: unknown, now: number): string {
  if (value === null) return "—";
  if (typeof value === "string" && /(_at|heartbeat|time)$/.test(key) && toDate(value)) {
    return `${formatDateTime(value)} (${formatRelativeTime(value, now)})`;
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string" || typeof value === "number") return String(value);
  return JSON.stringify(value);
}
