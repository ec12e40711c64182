import { lazy, Suspense, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { errorMessage, isNotFound, pageUrl } from "../../api/client";
import {
  HEALTH_REFRESH_MS,
  METRICS_REFRESH_MS,
  useAlertStatus,
  useCursorPage,
  useHealth,
  useMetricSeries,
  useMetricsSummary,
} from "../../api/queries";
import type { Alert, AlertStatus, Health, HealthComponent, MetricRange } from "../../api/types";
import { DiskBar } from "../nodes/Disk";
import { NodeHealthBadge } from "../nodes/NodeHealth";
import { TierBytes, exactBytes } from "../../components/Tiers";
import { Badge, ErrorState, LoadingState, NotAvailableState } from "../../components/States";
import {
  formatBytes,
  formatCount,
  formatDateTime,
  formatDuration,
  formatPercent,
  formatRelativeTime,
  toDate,
} from "../../lib/format";
import { useNow, usePageTitle } from "../../lib/hooks";
import { DEFAULT_RANGE, openingRange, RANGE_PROBE_SERIES, RANGES, sampleTimes } from "./metrics";

// ECharts arrives with this chunk, after the cards.
const OverviewCharts = lazy(() => import("./OverviewCharts"));

/**
 * The charts' range: the URL's (``?range=``), else the one the samples there are call for (openingRange), so the
 * Overview never opens on an empty range while older data exists. ``null`` while that is being found out.
 * The usual range is asked first (raw samples, minutes apart: a young system's span is exact); only when it
 * holds nothing is the longest one asked (rollups), to find how far back the newest sample is.
 */
function useChartRange(search: URLSearchParams): MetricRange | null {
  const chosen = RANGES.find((r) => r === search.get("range"));
  const usual = useMetricSeries(RANGE_PROBE_SERIES, DEFAULT_RANGE, { enabled: chosen === undefined });
  const recent = usual.data ? sampleTimes(usual.data) : null;
  const longest = useMetricSeries(RANGE_PROBE_SERIES, "30d", { enabled: chosen === undefined && recent?.length === 0 });
  if (chosen) return chosen;
  if (usual.isError) return DEFAULT_RANGE;
  if (recent === null) return null;
  if (recent.length > 0) return openingRange(recent, usual.dataUpdatedAt || Date.now());
  if (longest.data) return openingRange(sampleTimes(longest.data), longest.dataUpdatedAt || Date.now());
  return longest.isError ? DEFAULT_RANGE : null;
}

/** Auto-refresh choices for metrics and alerts (``?refresh=<seconds>``); 30 s unless chosen. */
const REFRESH_CHOICES_MS = [5_000, 15_000, 30_000, 60_000, 300_000];

function refreshFrom(search: URLSearchParams): number {
  const chosen = Number(search.get("refresh")) * 1000;
  return REFRESH_CHOICES_MS.includes(chosen) ? chosen : METRICS_REFRESH_MS;
}

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

/**
 * The overall status: "degraded" when a component is down, else "alerting" while any alert fires
 * (silenced ones too: a silence stops notifications, not the condition), else "ok". Both inputs are
 * the server's; an alert status the server does not offer counts as none firing.
 */
export function overallStatus(health: Health, alerts: AlertStatus | undefined): { status: string; tone: "ok" | "warn" | "fail"; text: string } {
  if (health.status !== "ok") return { status: health.status, tone: "fail", text: `! ${health.status}` };
  if (alerts && alerts.status === "firing" && alerts.firing > 0) {
    const silenced = alerts.silenced > 0 ? ` (${alerts.silenced} silenced)` : "";
    const tone = alerts.silenced >= alerts.firing ? "warn" : "fail";
    return { status: "alerting", tone, text: `! alerting: ${alerts.firing} firing${silenced}` };
  }
  return { status: "ok", tone: "ok", text: "✓ ok" };
}

export function OverviewPage() {
  usePageTitle("Overview");
  const health = useHealth();
  const now = useNow(1000);
  const [search, setSearch] = useSearchParams();
  const [auto, setAuto] = useState(true);
  const refreshMs = refreshFrom(search);
  const refetchInterval = auto ? refreshMs : false;
  const alertStatus = useAlertStatus({ refetchInterval: HEALTH_REFRESH_MS });
  const overall = health.data ? overallStatus(health.data, alertStatus.data) : null;

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Overview</h1>
          <p className="muted">
            Cluster data lifecycle and the health of its services. Health refreshes every{" "}
            {formatDuration(HEALTH_REFRESH_MS)}.
          </p>
        </div>
        {overall && (
          <div className="overall" aria-live="polite">
            <span className="overall-label">Overall</span>
            <Badge tone={overall.tone} testId="health-status">
              <span data-status={overall.status}>{overall.text}</span>
            </Badge>
          </div>
        )}
      </div>

      <FiringAlerts refetchInterval={refetchInterval} />
      <MetricsSection
        search={search}
        setSearch={setSearch}
        auto={auto}
        setAuto={setAuto}
        refreshMs={refreshMs}
        refetchInterval={refetchInterval}
      />

      <h2 className="section-title">System health</h2>
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
  const { detail, last_heartbeat: lastHeartbeat } = component;
  // Every component carries last_heartbeat (null where there is none); beat's says "never" when null.
  const hasHeartbeat = name === "beat" || lastHeartbeat !== null;
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
          {lastHeartbeat && toDate(lastHeartbeat) ? (
            <time dateTime={lastHeartbeat} title={lastHeartbeat}>
              {formatDateTime(lastHeartbeat)} ({formatRelativeTime(lastHeartbeat, now)})
            </time>
          ) : (
            <span className="muted">never</span>
          )}
        </p>
      )}
    </article>
  );
}

function FiringAlerts({ refetchInterval }: { refetchInterval: number | false }) {
  const alerts = useCursorPage<Alert>("alerts", pageUrl("/api/alerts/", { state: "firing", page_size: 20 }), { refetchInterval });
  if (alerts.isPending) return null;
  if (alerts.isError) {
    return (
      <p className="muted small" data-testid="overview-alerts-unavailable">
        {isNotFound(alerts.error) ? "Alerts are not available yet on this server." : `Alerts could not be loaded: ${errorMessage(alerts.error)}`}
      </p>
    );
  }
  const firing = alerts.data.results;
  if (firing.length === 0) {
    return (
      <p className="ok-text small" data-testid="overview-alerts-none">
        ✓ No alerts firing.
      </p>
    );
  }
  return (
    <section className="section" aria-labelledby="firing-title" data-testid="overview-alerts">
      <div className="banner banner-fail" role="alert">
        <strong id="firing-title">
          {firing.length}
          {alerts.data.next ? "+" : ""} alert{firing.length === 1 ? "" : "s"} firing
        </strong>{" "}
        · <Link to="/alerts">Open alerts</Link>
        <ul className="alert-list">
          {firing.map((a) => (
            <li key={a.id} data-testid={`overview-alert-${a.id}`}>
              <Badge tone={a.severity === "critical" ? "fail" : a.severity === "warning" ? "warn" : "neutral"}>{a.severity}</Badge>{" "}
              <strong>{a.rule_name}</strong> on <span className="mono">{a.scope}</span>: {a.summary}
              {a.silenced && (
                <span className="muted small" data-testid={`overview-alert-silenced-${a.id}`}>
                  {" "}
                  · silenced{a.silenced_until ? ` until ${formatDateTime(a.silenced_until, { seconds: false })}` : ""}
                </span>
              )}
              {a.acknowledged_by && <span className="muted small"> (acknowledged by {a.acknowledged_by})</span>}
            </li>
          ))}
        </ul>
      </div>
    </section>
  );
}

function Stat({ label, value, testId, title }: { label: string; value: string; testId: string; title?: string }) {
  return (
    <div className="stat" data-testid={testId} title={title}>
      <div className="stat-label">{label}</div>
      <div className="stat-value">{value}</div>
    </div>
  );
}

function MetricsSection({
  search,
  setSearch,
  auto,
  setAuto,
  refreshMs,
  refetchInterval,
}: {
  search: URLSearchParams;
  setSearch: ReturnType<typeof useSearchParams>[1];
  auto: boolean;
  setAuto: (auto: boolean) => void;
  refreshMs: number;
  refetchInterval: number | false;
}) {
  const range = useChartRange(search);
  const setParam = (key: string, value: string) => {
    const next = new URLSearchParams(search);
    next.set(key, value);
    setSearch(next, { replace: true });
  };
  const summary = useMetricsSummary({ refetchInterval });
  const unavailable = summary.isError && isNotFound(summary.error);

  return (
    <section className="section" aria-labelledby="metrics-title">
      <div className="toolbar">
        <h2 id="metrics-title" className="section-title" style={{ margin: 0 }}>
          Cluster
        </h2>
        <div className="segmented" role="group" aria-label="Time range">
          {RANGES.map((r) => (
            <button
              key={r}
              type="button"
              aria-pressed={r === range}
              onClick={() => setParam("range", r)}
              data-testid={`range-${r}`}
            >
              {r}
            </button>
          ))}
        </div>
        <label className="check">
          <input type="checkbox" checked={auto} onChange={(e) => setAuto(e.target.checked)} data-testid="auto-refresh" />
          Auto-refresh every
        </label>
        <select
          aria-label="Auto-refresh interval"
          value={refreshMs}
          disabled={!auto}
          onChange={(e) => setParam("refresh", String(Number(e.target.value) / 1000))}
          data-testid="auto-refresh-interval"
        >
          {REFRESH_CHOICES_MS.map((ms) => (
            <option key={ms} value={ms}>
              {formatDuration(ms)}
            </option>
          ))}
        </select>
        {summary.dataUpdatedAt > 0 && (
          <span className="muted small">updated {formatDateTime(summary.dataUpdatedAt)}</span>
        )}
      </div>

      {summary.isPending && <LoadingState label="Loading cluster metrics…" />}
      {unavailable && <NotAvailableState feature="Cluster metrics" testId="metrics-unavailable" />}
      {summary.isError && !unavailable && !summary.data && (
        <ErrorState title="Could not load cluster metrics" error={summary.error} onRetry={() => void summary.refetch()} />
      )}
      {summary.data && (
        <>
          <div className="stat-grid">
            {/* Rounded for reading; the exact bytes (stored = local + remote only) on hover. */}
            <Stat
              label="Stored"
              value={formatBytes(summary.data.stored_bytes)}
              title={exactBytes(summary.data.stored_bytes)}
              testId="metric-stored-bytes"
            />
            <Stat
              label="Local (node disks)"
              value={formatBytes(summary.data.local_bytes)}
              title={exactBytes(summary.data.local_bytes)}
              testId="metric-local-bytes"
            />
            <Stat
              label="Remote only (object store)"
              value={formatBytes(summary.data.remote_only_bytes)}
              title={exactBytes(summary.data.remote_only_bytes)}
              testId="metric-remote-only-bytes"
            />
            <Stat label="Records" value={formatCount(summary.data.stored_records)} testId="metric-stored-records" />
            <Stat label="Expired ratio" value={formatPercent(summary.data.expired_ratio)} testId="metric-expired-ratio" />
            <Stat
              label="Backlog"
              value={`${formatCount(summary.data.backlog_messages)} msgs${
                summary.data.backlog_live_messages != null ? ` (${formatCount(summary.data.backlog_live_messages)} live)` : ""
              }`}
              testId="metric-backlog"
            />
          </div>
          {summary.data.collected_at && (
            <p className="muted small" data-testid="metric-collected-at">
              Figures from the metrics collection of {formatDateTime(summary.data.collected_at)}: every subscription and shard summed.
            </p>
          )}
          {summary.data.nodes.length > 0 && (
            <div className="card-grid" data-testid="overview-disks">
              {summary.data.nodes.map((d) => (
                <article key={d.name} className="card" aria-label={`Disk of ${d.name}`}>
                  <div className="card-head">
                    <h3 className="mono" style={{ margin: "0 0 6px", fontSize: "1rem" }}>
                      {d.name}
                    </h3>
                    <NodeHealthBadge node={d} testId={`overview-node-health-${d.name}`} />
                  </div>
                  <DiskBar disk={d} minHistoryS={summary.data.forecast_min_history_s} />
                  <p className="muted small">
                    <TierBytes local={d.local_bytes} remoteOnly={d.remote_only_bytes} testId={`overview-node-tiers-${d.name}`} />
                  </p>
                </article>
              ))}
            </div>
          )}
        </>
      )}
      {!unavailable && (
        <div className="section">
          <Suspense fallback={<LoadingState label="Loading charts…" />}>
            {range ? (
              <OverviewCharts range={range} refetchInterval={refetchInterval} summary={summary.data} />
            ) : (
              <LoadingState label="Finding the range with data…" />
            )}
          </Suspense>
        </div>
      )}
    </section>
  );
}
