// The alerts of one state: list, acknowledge, silence.
import { useState } from "react";
import { errorMessage, isNotFound, pageUrl } from "../../api/client";
import {
  useAckAlert,
  useAlertRules,
  useCursorPage,
  useSilenceAlert,
  METRICS_REFRESH_MS,
} from "../../api/queries";
import type {
  Alert,
  AlertSeverity,
  AlertState,
} from "../../api/types";
import { CursorPager } from "../../components/CursorPager";
import { Badge, EmptyState, ErrorState, LoadingState, NotAvailableState } from "../../components/States";
import { formatDateTime, formatDuration, formatRelativeTime, toDate } from "../../lib/format";
import { useNow } from "../../lib/hooks";
import { alertMetric, alertTimeline, formatThreshold } from "./alerts";

export const SEVERITY_TONE: Record<AlertSeverity, "fail" | "warn" | "neutral"> = { critical: "fail", warning: "warn", info: "neutral" };
const SILENCE_CHOICES = [15, 60, 240, 1440, 10080];


/** An alert's value or threshold: a percentage for ratio metrics, else at most 4 significant digits. */
export function alertValue(value: number | null, metric: string | undefined): string {
  if (value === null || !Number.isFinite(value)) return "—";
  if (metric) return formatThreshold(metric, Number(value.toPrecision(4)));
  return String(Number(value.toPrecision(4)));
}

export function AlertList({ state, mayAct }: { state: AlertState; mayAct: boolean }) {
  const firstUrl = pageUrl("/api/alerts/", { state });
  const [url, setUrl] = useState(firstUrl);
  const page = useCursorPage<Alert>("alerts", url, { refetchInterval: state === "resolved" ? false : METRICS_REFRESH_MS });
  const rules = useAlertRules(); // for each alert's metric: ratios read as percentages
  // The alert's own copy of its rule's metric (newer servers), else the rule's.
  const metricOf = (a: Alert) => alertMetric(a, rules.data?.items);
  const ack = useAckAlert();
  const silence = useSilenceAlert();
  const [minutes, setMinutes] = useState<Record<number, number>>({});
  const now = useNow(15_000);

  if (page.isPending) return <LoadingState label="Loading alerts…" />;
  if (page.isError && !page.data) {
    if (isNotFound(page.error)) return <NotAvailableState feature="Alerting" testId="alerts-unavailable" />;
    return <ErrorState title="Could not load alerts" error={page.error} onRetry={() => void page.refetch()} />;
  }
  const rows = page.data.results;
  const actionError = ack.error ?? silence.error;
  return (
    <>
      {actionError && (
        <p className="form-error" role="alert" data-testid="alert-action-error">
          {errorMessage(actionError)}
        </p>
      )}
      {rows.length === 0 ? (
        <EmptyState title={`No ${state} alerts`}>
          {state === "firing" ? "All clear." : state === "pending" ? "No rule is close to firing." : "No alert has resolved yet."}
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="alerts-table">
            <thead>
              <tr>
                <th scope="col">Alert</th>
                <th scope="col">Value</th>
                <th scope="col">{state === "resolved" ? "Fired → resolved" : state === "pending" ? "Pending since" : "Since"}</th>
                <th scope="col">Handling</th>
                {mayAct && state !== "resolved" && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => {
                // The server's word (older servers: silenced_until still ahead).
                const silenced = a.silenced ?? (toDate(a.silenced_until) !== null && toDate(a.silenced_until)!.getTime() > now);
                return (
                  <tr key={a.id} data-testid={`alert-row-${a.id}`} className={`severity-${a.severity}`}>
                    <th scope="row">
                      <Badge tone={SEVERITY_TONE[a.severity] ?? "neutral"}>{a.severity}</Badge> {a.rule_name}
                      {a.rule === null && (
                        <span className="muted small" data-testid={`alert-rule-deleted-${a.id}`}>
                          {" "}
                          (rule deleted)
                        </span>
                      )}
                      <div className="muted small mono">{a.scope}</div>
                      <div className="small">{a.summary}</div>
                    </th>
                    <td className="small">
                      {alertValue(a.value, metricOf(a))} <span className="muted">vs {alertValue(a.threshold, metricOf(a))}</span>
                    </td>
                    <td className="small" data-testid={`alert-when-${a.id}`}>
                      {state === "resolved" ? (
                        alertTimeline(a) === "fired" ? (
                          <>
                            {formatDateTime(a.fired_at)} → {formatDateTime(a.resolved_at)}
                          </>
                        ) : (
                          // Stored by older servers: pending alerts that cleared were kept as "resolved".
                          <>
                            <span className="muted">never fired:</span> pending {formatDateTime(a.started_at)}, cleared {formatDateTime(a.resolved_at)}
                          </>
                        )
                      ) : (
                        <>
                          {formatDateTime(a.fired_at ?? a.started_at)}
                          <div className="muted">{formatRelativeTime(a.fired_at ?? a.started_at, now)}</div>
                        </>
                      )}
                    </td>
                    <td className="small" data-testid={`alert-handling-${a.id}`}>
                      {a.acknowledged_by ? (
                        <div>
                          acknowledged by {a.acknowledged_by} {formatRelativeTime(a.acknowledged_at, now)}
                        </div>
                      ) : (
                        <div className="muted">not acknowledged</div>
                      )}
                      {silenced && <div>silenced until {formatDateTime(a.silenced_until, { seconds: false })}</div>}
                    </td>
                    {mayAct && state !== "resolved" && (
                      <td>
                        <div className="action-bar">
                          {!a.acknowledged_by && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => ack.mutate(a.id)}
                              disabled={ack.isPending}
                              data-testid={`alert-ack-${a.id}`}
                            >
                              Acknowledge
                            </button>
                          )}
                          <label className="visually-hidden" htmlFor={`silence-${a.id}`}>
                            Silence for
                          </label>
                          <select
                            id={`silence-${a.id}`}
                            value={minutes[a.id] ?? 60}
                            onChange={(e) => setMinutes((m) => ({ ...m, [a.id]: Number(e.target.value) }))}
                            data-testid={`alert-silence-minutes-${a.id}`}
                          >
                            {SILENCE_CHOICES.map((m) => (
                              <option key={m} value={m}>
                                {formatDuration(m * 60_000)}
                              </option>
                            ))}
                          </select>
                          <button
                            type="button"
                            className="button button-small"
                            onClick={() => silence.mutate({ id: a.id, minutes: minutes[a.id] ?? 60 })}
                            disabled={silence.isPending}
                            data-testid={`alert-silence-${a.id}`}
                          >
                            Silence
                          </button>
                          {silenced && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => silence.mutate({ id: a.id, minutes: 0 })}
                              disabled={silence.isPending}
                              data-testid={`alert-unsilence-${a.id}`}
                            >
                              Lift silence
                            </button>
                          )}
                        </div>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <CursorPager page={page.data} onPage={setUrl} onFirst={() => setUrl(firstUrl)} atFirst={url === firstUrl} isFetching={page.isFetching} label="Alert pages" />
    </>
  );
}

// ---- Rules -------------------------------------------------------------------

// Metrics a rule may watch (backend/apps/metrics/catalog.py SERIES + "forecast"); the server validates.
