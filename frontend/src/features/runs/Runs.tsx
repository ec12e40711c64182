// Task runs: a table with live progress (polled every 2 s while a run on the
// page is active) and cursor paging, used by the Tasks page and the namespace
// detail page.

import { useState } from "react";
import { Link, useLocation } from "react-router";
import { withQuery, errorMessage, type QueryValue } from "../../api/client";
import { isActiveRun, RUN_POLL_MS, useCancelRun, useMe, useRunsPage } from "../../api/queries";
import type { RunState, TaskRun } from "../../api/types";
import { canOperate } from "../auth/roles";
import { formatBytes, formatCount, formatDateTime, formatDuration, formatRelativeTime, toDate } from "../../lib/format";
import { useNow } from "../../lib/hooks";
import { CursorPager } from "../../components/CursorPager";
import { ChangedNamespaces, FoldedSweeps } from "./RunFold";
import { Badge, EmptyState, ErrorState, LoadingState, ProgressBar } from "../../components/States";

const STATE_TONE: Record<RunState, "ok" | "warn" | "fail" | "neutral"> = {
  queued: "neutral",
  running: "warn",
  succeeded: "ok",
  failed: "fail",
  cancelled: "neutral",
};

export const RUN_KIND_LABELS: Record<string, string> = {
  expiry_scan: "Expiry scan",
  retention: "Retention",
  reclaim: "Reclaim",
  compaction: "Compaction",
  file_clean: "File clean",
  disk_check: "Disk check",
  force_delete: "Force delete",
  subscription_ttl: "Subscription TTL",
  backlog_quota: "Backlog quota",
  offload: "Offload",
  recall: "Recall",
  catalog_sync: "Catalog sync",
  lake_export: "Lake export (Spark)",
  lifecycle_report: "Lifecycle report (Spark)",
  compaction_plan: "Compaction plan (Spark)",
  ttl_backfill: "TTL backfill (Spark)",
};

/** A run's count as text: byte counts (bytes_offloaded, local_bytes_dropped, bytes_recalled, …) as sizes, the rest as numbers. */
export const formatRunCount = (key: string, value: number): string =>
  /(^|_)bytes(_|$)/.test(key) ? formatBytes(value) : formatCount(value);

export const runKindLabel = (kind: string) => RUN_KIND_LABELS[kind] ?? kind.replace(/_/g, " ");

/** Wall time a run took (or has taken so far); none for a row of folded sweeps, whose start and finish span its window. */
export function runDuration(run: Pick<TaskRun, "started_at" | "finished_at"> & Partial<Pick<TaskRun, "window_start">>, now: number): number | null {
  if (run.window_start) return null;
  const start = toDate(run.started_at);
  if (!start) return null;
  const end = toDate(run.finished_at)?.getTime() ?? now;
  return Math.max(0, end - start.getTime());
}

/** Where a run opens: on the Tasks page the same filters with `run=<id>`, elsewhere `/tasks?run=<id>`. */
export function useRunHref(): (id: number) => string {
  const location = useLocation();
  return (id) => {
    if (location.pathname !== "/tasks") return `/tasks?run=${id}`;
    const params = new URLSearchParams(location.search);
    params.set("run", String(id));
    return `/tasks?${params.toString()}`;
  };
}

export function RunsList({
  filters,
  emptyHint,
  highlight,
}: {
  filters: Record<string, QueryValue>;
  emptyHint?: string;
  /** A run to mark in the table (the one opened with `?run=`). */
  highlight?: number | null;
}) {
  const firstUrl = withQuery("/api/runs/", filters);
  const [cursor, setCursor] = useState<{ base: string; url: string } | null>(null);
  // A change of filters goes back to the first page.
  const url = cursor && cursor.base === firstUrl ? cursor.url : firstUrl;
  const runs = useRunsPage(url);
  const polling = runs.data?.results.some(isActiveRun) ?? false;

  if (runs.isPending) return <LoadingState label="Loading runs…" />;
  if (runs.isError && !runs.data) {
    return (
      <ErrorState title="Could not load runs" error={runs.error} onRetry={() => void runs.refetch()} retrying={runs.isFetching} />
    );
  }
  return (
    <div>
      {runs.isError && (
        <div className="banner banner-warn" role="alert">
          Could not refresh: {errorMessage(runs.error)}
        </div>
      )}
      {runs.data.results.length === 0 ? (
        <EmptyState title="No runs match">{emptyHint ?? "Change the filters, or start an action."}</EmptyState>
      ) : (
        <RunsTable runs={runs.data.results} highlight={highlight} />
      )}
      <p className="muted small" aria-live="polite">
        {polling ? `Live: refreshing every ${formatDuration(RUN_POLL_MS)} while runs are active.` : ""}
      </p>
      <CursorPager
        page={runs.data}
        onPage={(u) => setCursor({ base: firstUrl, url: u })}
        onFirst={() => setCursor(null)}
        atFirst={url === firstUrl}
        isFetching={runs.isFetching}
        label="Run pages"
      />
    </div>
  );
}

export function RunsTable({ runs, highlight }: { runs: TaskRun[]; highlight?: number | null }) {
  const { data: user } = useMe();
  const runHref = useRunHref();
  const mayCancel = canOperate(user);
  const cancel = useCancelRun();
  const now = useNow(1000);
  return (
    <div className="table-wrap">
      <table className="table table-compact" data-testid="runs-table">
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Target</th>
            <th scope="col">State</th>
            <th scope="col">Progress</th>
            <th scope="col">Counts</th>
            <th scope="col" className="num">
              Reclaimed
            </th>
            <th scope="col">Started</th>
            <th scope="col">Duration</th>
            {mayCancel && <th scope="col"><span className="visually-hidden">Actions</span></th>}
          </tr>
        </thead>
        <tbody>
          {runs.map((run) => {
            const active = isActiveRun(run);
            const dur = runDuration(run, now);
            const marked = highlight === run.id;
            return (
              <tr
                key={run.id}
                data-testid={`run-row-${run.id}`}
                data-highlighted={marked ? "true" : undefined}
                aria-current={marked ? "true" : undefined}
                className={marked ? "is-selected" : undefined}
              >
                <th scope="row">
                  <Link className="mono" to={runHref(run.id)} data-testid={`run-link-${run.id}`}>
                    #{run.id}
                  </Link>{" "}
                  {runKindLabel(run.kind)}
                  {run.dry_run && (
                    <>
                      {" "}
                      <Badge tone="neutral">dry run</Badge>
                    </>
                  )}
                  <div className="muted small">
                    {run.started_by ? `by ${run.started_by}` : run.schedule ? `schedule ${run.schedule}` : "system"}
                  </div>
                  <FoldedSweeps run={run} />
                </th>
                <td>
                  {run.namespace && <div className="mono">{run.namespace}{run.shard != null ? ` / shard ${run.shard}` : ""}</div>}
                  {run.node && <div className="muted small">node {run.node}</div>}
                  {!run.namespace && !run.node && <span className="muted">cluster</span>}
                  <ChangedNamespaces run={run} />
                </td>
                <td>
                  <Badge tone={STATE_TONE[run.state] ?? "neutral"} testId={`run-state-${run.id}`}>
                    {run.state}
                  </Badge>
                  {run.cancel_requested && active && <div className="muted small">cancel requested</div>}
                  {run.error && <div className="error-text small">{run.error}</div>}
                  {typeof run.params?.skipped_reason === "string" && (
                    <div className="muted small" data-testid={`run-skipped-${run.id}`}>
                      skipped: {run.params.skipped_reason}
                    </div>
                  )}
                </td>
                <td>
                  {active || run.progress > 0 ? (
                    <ProgressBar value={run.progress} label={`Run ${run.id} progress`} testId={`run-progress-${run.id}`} />
                  ) : (
                    <span className="muted">—</span>
                  )}
                  {run.steps > 0 && <div className="muted small">{formatCount(run.steps)} steps</div>}
                </td>
                <td>
                  <div className="counts" data-testid={`run-counts-${run.id}`}>
                    {run.dry_run && Object.entries(run.counts ?? {}).length > 0 && (
                      <span className="muted" title="a dry run: what the action would do; nothing changed">would:</span>
                    )}
                    {Object.entries(run.counts ?? {}).length === 0 ? (
                      <span className="muted">—</span>
                    ) : (
                      Object.entries(run.counts).map(([k, v]) => (
                        <span key={k}>
                          <span className="muted">{k.replace(/_/g, " ")}</span> {formatRunCount(k, v)}
                        </span>
                      ))
                    )}
                  </div>
                </td>
                <td className="num">{run.bytes_reclaimed ? formatBytes(run.bytes_reclaimed) : <span className="muted">—</span>}</td>
                <td>
                  {run.started_at ? (
                    <>
                      <time dateTime={run.started_at}>{formatDateTime(run.started_at)}</time>
                      <div className="muted small">{formatRelativeTime(run.started_at, now)}</div>
                    </>
                  ) : (
                    <span className="muted">queued {formatRelativeTime(run.created_at, now)}</span>
                  )}
                </td>
                <td>{dur === null ? <span className="muted">—</span> : formatDuration(dur)}</td>
                {mayCancel && (
                  <td>
                    {active && (
                      <button
                        type="button"
                        className="button button-small"
                        disabled={run.cancel_requested || (cancel.isPending && cancel.variables === run.id)}
                        onClick={() => cancel.mutate(run.id)}
                        data-testid={`run-cancel-${run.id}`}
                      >
                        {run.cancel_requested ? "Cancelling…" : "Cancel"}
                      </button>
                    )}
                    {cancel.isError && cancel.variables === run.id && (
                      <div className="error-text small" role="alert">
                        {errorMessage(cancel.error)}
                      </div>
                    )}
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
