import { useEffect, useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { errorMessage, isNotFound } from "../../api/client";
import {
  FIGURES_REFRESH_MS,
  isActiveRun,
  useDeleteNamespace,
  useLifecycleReport,
  useMe,
  useNamespace,
  useNamespaceSummary,
  useRun,
  useStartSparkJob,
  useSyncNamespace,
} from "../../api/queries";
import { canAdminister, canOperate } from "../auth/roles";
import { NamespaceActions } from "../runs/Actions";
import { ConfirmByName } from "../../components/ConfirmByName";
import { PolicyPanel } from "../policies/PolicyEditor";
import { ProduceMessagePanel } from "../messages/ProduceMessage";
import { RunLink } from "../runs/RunFold";
import { RunsList } from "../runs/Runs";
import { SegmentsList } from "../segments/Segments";
import { SubscriptionsPanel } from "../subscriptions/Subscriptions";
import { Badge, EmptyState, ErrorState, LoadingState, NotAvailableState } from "../../components/States";
import { tabPanelId, Tabs } from "../../components/Tabs";
import { TIER_HELP, TierBytes, exactBytes } from "../../components/Tiers";
import type { LifecycleReportRow, LifecycleReportTotals, ShardPlacement } from "../../api/types";
import { placedOn } from "./placement";
import { formatBytes, formatCount, formatDateTime, formatPercent } from "../../lib/format";
import { useNow, usePageTitle } from "../../lib/hooks";
import {
  expiredTone,
  formatPercentiles,
  formatReportDay,
  formatReportDuration,
  lifetimeBars,
  REPORT_COMMAND,
  REPORT_DAY_CHOICES,
  REPORT_JOB,
} from "../reports/reports";
import { TimeCell } from "../../components/TimeCell";
import { SYNC_TONE } from "./sync";

const TABS = [
  { value: "overview", label: "Overview" },
  { value: "policy", label: "Policy" },
  { value: "segments", label: "Segments" },
  { value: "subscriptions", label: "Subscriptions" },
  { value: "produce", label: "Produce" },
  { value: "runs", label: "Runs" },
  { value: "report", label: "Lifecycle report" },
  { value: "actions", label: "Actions" },
] as const;
type Tab = (typeof TABS)[number]["value"];

export default function NamespaceDetailPage() {
  const { name = "" } = useParams();
  usePageTitle(name);
  const [params, setParams] = useSearchParams();
  const tab: Tab = (TABS.find((t) => t.value === params.get("tab"))?.value ?? "overview") as Tab;
  const ns = useNamespace(name);
  const { data: user } = useMe();
  const [deleting, setDeleting] = useState(false);
  const del = useDeleteNamespace();
  const navigate = useNavigate();

  if (ns.isPending) return <LoadingState label={`Loading namespace ${name}…`} />;
  if (ns.isError && !ns.data) {
    if (isNotFound(ns.error)) {
      return (
        <div className="page">
          <EmptyState title={`Namespace “${name}” does not exist`}>
            It may have been deleted. Go back to the <Link to="/namespaces">namespace list</Link>.
          </EmptyState>
        </div>
      );
    }
    return <ErrorState title="Could not load the namespace" error={ns.error} onRetry={() => void ns.refetch()} />;
  }
  const n = ns.data;

  return (
    <div className="page">
      <p className="small">
        <Link to="/namespaces">← Namespaces</Link>
      </p>
      <div className="page-header">
        <div>
          <h1 className="mono" data-testid="namespace-title">
            {n.name}
          </h1>
          <p className="muted">
            {n.shards} shard{n.shards === 1 ? "" : "s"} on <span data-testid="namespace-nodes">{placedOn(n)}</span> ·{" "}
            <Badge tone={SYNC_TONE[n.sync_state] ?? "neutral"} testId="namespace-sync-state">
              {n.sync_state}
            </Badge>
          </p>
          {n.sync_error && <p className="error-text small">{n.sync_error}</p>}
        </div>
        <div className="action-bar">
          <Link className="button" to={`/messages?namespace=${encodeURIComponent(n.name)}`} data-testid="namespace-messages-link">
            Browse messages
          </Link>
          {canOperate(user) && <SyncButton name={n.name} />}
          {canAdminister(user) && (
            <button type="button" className="button button-danger-outline" onClick={() => setDeleting(true)} data-testid="namespace-delete">
              Delete…
            </button>
          )}
        </div>
      </div>

      {deleting && (
        <ConfirmByName
          name={n.name}
          title={`Delete namespace ${n.name}`}
          confirmLabel="Delete namespace"
          pending={del.isPending}
          error={del.error}
          onCancel={() => {
            setDeleting(false);
            del.reset();
          }}
          onConfirm={(typed) =>
            del.mutate({ name: n.name, confirm: typed }, { onSuccess: () => navigate("/namespaces", { replace: true }) })
          }
        >
          <p>
            This deletes the namespace and <strong>all of its data</strong> on the node. It cannot be undone.
          </p>
        </ConfirmByName>
      )}

      <Tabs
        tabs={[...TABS]}
        value={tab}
        onChange={(t) => setParams(t === "overview" ? {} : { tab: t }, { replace: true })}
        label="Namespace sections"
        idPrefix="ns"
      />
      <div role="tabpanel" id={tabPanelId("ns", tab)} aria-labelledby={`ns-tab-${tab}`}>
        {tab === "overview" && <SummaryPanel name={n.name} placement={n.placement ?? []} />}
        {tab === "policy" && <PolicyPanel scope={{ kind: "namespace", name: n.name }} />}
        {tab === "segments" && (
          <SegmentsList filters={{ namespace: n.name, ordering: "-max_timestamp", page_size: 50 }} emptyHint="No segments in the catalog yet: sync the namespace." />
        )}
        {tab === "subscriptions" && <SubscriptionsPanel name={n.name} shards={n.shards} />}
        {tab === "produce" && <ProduceMessagePanel name={n.name} shards={n.shards} />}
        {tab === "runs" && <RunsList filters={{ namespace: n.name }} emptyHint="No lifecycle runs for this namespace yet." />}
        {tab === "report" && <LifecycleReportPanel name={n.name} />}
        {tab === "actions" && <NamespaceActions name={n.name} />}
      </div>
    </div>
  );
}

function SyncButton({ name }: { name: string }) {
  const sync = useSyncNamespace(name);
  return (
    <span>
      <button
        type="button"
        className="button"
        onClick={() => sync.mutate()}
        disabled={sync.isPending}
        title="Refresh the segment catalog from the node"
        data-testid="namespace-sync"
      >
        {sync.isPending ? "Syncing…" : "Sync catalog"}
      </button>
      {sync.data && (
        <span className="ok-text small" role="status" data-testid="namespace-sync-result">
          {" "}
          +{sync.data.inserted} new, {sync.data.updated} updated, {sync.data.deleted} removed
        </span>
      )}
      {sync.isError && (
        <span className="error-text small" role="alert">
          {" "}
          {errorMessage(sync.error)}
        </span>
      )}
    </span>
  );
}

function Stat({ label, value, testId, title }: { label: string; value: string; testId?: string; title?: string }) {
  return (
    <div className="stat" data-testid={testId} title={title}>
      <div className="stat-label">{label}</div>
      <div className="stat-value">{value}</div>
    </div>
  );
}

function SummaryPanel({ name, placement }: { name: string; placement: ShardPlacement[] }) {
  const nodeOf = new Map(placement.map((p) => [p.shard, p.node]));
  // The server refreshes these figures every metrics interval; so does the page.
  const summary = useNamespaceSummary(name, { refetchInterval: FIGURES_REFRESH_MS });
  const now = useNow(15_000);
  if (summary.isPending) return <LoadingState label="Loading usage…" />;
  if (summary.isError && !summary.data) {
    return <ErrorState title="Could not load usage" error={summary.error} onRetry={() => void summary.refetch()} />;
  }
  const s = summary.data;
  return (
    <>
      <div className="stat-grid" data-testid="namespace-summary">
        <Stat
          label="Stored"
          value={formatBytes(s.stored_bytes)}
          title={exactBytes(s.stored_bytes)}
          testId="summary-stored-bytes"
        />
        <Stat label="Records" value={formatCount(s.stored_records)} testId="summary-records" />
        <Stat label="Live records" value={formatCount(s.live_records)} testId="summary-live-records" />
        <Stat
          label="Expired ratio"
          value={`${formatPercent(s.expired_ratio)}${s.expired_records != null ? ` (${formatCount(s.expired_records)})` : ""}`}
          testId="summary-expired-ratio"
        />
        <Stat label="Segments" value={formatCount(s.segment_count)} testId="summary-segments" />
        <Stat
          label="Local (node disk)"
          value={formatBytes(s.local_bytes)}
          title={exactBytes(s.local_bytes)}
          testId="summary-local-bytes"
        />
        <Stat
          label="Remote only (object store)"
          value={formatBytes(s.remote_only_bytes)}
          title={exactBytes(s.remote_only_bytes)}
          testId="summary-remote-only-bytes"
        />
        <Stat
          label="Backlog"
          value={
            s.backlog_messages == null
              ? "—"
              : `${formatCount(s.backlog_messages)} msgs${s.backlog_live_messages != null ? ` (${formatCount(s.backlog_live_messages)} live)` : ""}`
          }
          testId="summary-backlog"
        />
      </div>
      <p className="muted small" data-testid="summary-collected-at">
        {s.collected_at
          ? `Figures from the node as of ${formatDateTime(s.collected_at)}; expired = past its effective expiry, not yet reclaimed; backlog summed over subscriptions and shards.`
          : "Backlog appears after the next metrics collection."}
      </p>
      <dl className="kv small">
        <dt>Last TTL scan</dt>
        <dd>
          <TimeCell value={s.last_scan_at} now={now} never="never" />
          <RunLink run={s.last_scan_run} testId="summary-last-scan-run" />
        </dd>
        <dt>Last compaction</dt>
        <dd>
          <TimeCell value={s.last_compaction_at} now={now} never="never" />
          <RunLink run={s.last_compaction_run} testId="summary-last-compaction-run" />
        </dd>
      </dl>
      <h2 className="section">Shards</h2>
      {s.shards.length === 0 ? (
        <EmptyState title="No shard data yet">Sync the catalog to load the shards' offsets and sizes.</EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="shards-table">
            <thead>
              <tr>
                <th scope="col">Shard</th>
                <th scope="col">Node</th>
                <th scope="col" className="num">
                  Log start
                </th>
                <th scope="col" className="num">
                  End offset
                </th>
                <th scope="col" className="num">
                  Records (live)
                </th>
                <th scope="col" className="num">
                  Expired
                </th>
                <th scope="col" className="num">
                  Backlog
                </th>
                <th scope="col" className="num">
                  Size
                </th>
                <th scope="col" className="num">
                  Segments
                </th>
                <th scope="col" title={TIER_HELP}>
                  Local / remote only
                </th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {s.shards.map((sh) => (
                <tr key={sh.shard} data-testid={`shard-row-${sh.shard}`}>
                  <th scope="row">
                    <Link to={`/messages?namespace=${encodeURIComponent(name)}&shard=${sh.shard}`}>{sh.shard}</Link>
                  </th>
                  <td className="mono" data-testid={`shard-node-${sh.shard}`}>
                    {nodeOf.get(sh.shard) ?? "—"}
                  </td>
                  <td className="num" data-testid={`shard-log-start-${sh.shard}`}>
                    {formatCount(sh.log_start_offset)}
                  </td>
                  <td className="num" data-testid={`shard-end-offset-${sh.shard}`}>
                    {formatCount(sh.end_offset)}
                  </td>
                  <td className="num" data-testid={`shard-records-${sh.shard}`}>
                    {formatCount(sh.record_count)} <span className="muted small">({formatCount(sh.live_count)})</span>
                  </td>
                  <td className="num" data-testid={`shard-expired-${sh.shard}`}>
                    {sh.expired_ratio == null ? "—" : formatPercent(sh.expired_ratio)}
                    {sh.expired_records != null && <span className="muted small"> ({formatCount(sh.expired_records)})</span>}
                  </td>
                  <td className="num" data-testid={`shard-backlog-${sh.shard}`}>
                    {sh.backlog_messages == null || !sh.collected_at ? "—" : formatCount(sh.backlog_messages)}
                  </td>
                  <td className="num" data-testid={`shard-size-${sh.shard}`}>
                    {formatBytes(sh.size_bytes)}
                  </td>
                  <td className="num" data-testid={`shard-segments-${sh.shard}`}>
                    {formatCount(sh.segment_count)}
                  </td>
                  <td className="small">
                    <TierBytes local={sh.local_bytes} remoteOnly={sh.remote_only_bytes} testId={`shard-tiers-${sh.shard}`} />
                  </td>
                  <td>
                    <TimeCell value={sh.updated_at} now={now} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

function LifecycleReportPanel({ name }: { name: string }) {
  const [days, setDays] = useState<number>(30);
  const report = useLifecycleReport(name, days);
  const { data: user } = useMe();
  const operator = canOperate(user);
  const rows = report.data?.rows ?? [];

  let content;
  if (report.isPending) content = <LoadingState label="Loading the lifecycle report…" />;
  else if (report.isError && !report.data) {
    content = isNotFound(report.error) ? (
      <NotAvailableState feature="Lifecycle reports" testId="report-unavailable" />
    ) : (
      <div data-testid="report-error">
        <ErrorState title="Could not load the lifecycle report" error={report.error} onRetry={() => void report.refetch()} />
      </div>
    );
  } else if (rows.length === 0) {
    content = (
      <div data-testid="report-empty">
        <EmptyState title="No lifecycle report for this namespace yet">
          <p>
            The report is computed by a Spark job{operator ? ": start it with Run report below" : " (an operator can start it here)"}, by
            the daily schedule, or on the command line with <code>{REPORT_COMMAND}</code> (add{" "}
            <code>--post-url</code> pointing at <code>/api/reports/lifecycle</code> to send it here).
          </p>
        </EmptyState>
      </div>
    );
  } else content = <ReportTable rows={rows} totals={report.data!.totals} />;

  return (
    <section data-testid="lifecycle-report">
      <div className="toolbar">
        <label htmlFor="report-days">Days</label>
        <select id="report-days" value={days} onChange={(e) => setDays(Number(e.target.value))} data-testid="report-days">
          {REPORT_DAY_CHOICES.map((d) => (
            <option key={d} value={d}>
              last {d}
            </option>
          ))}
        </select>
        {rows[0] && (
          <span className="muted small" data-testid="report-generated">
            {" "}
            Generated {formatDateTime(rows[0].generated_at)}
          </span>
        )}
      </div>
      {content}
      {operator && <RunReportButton name={name} onDone={() => void report.refetch()} />}
    </section>
  );
}

/** The rows, and the totals over them as the control plane sends them (never added up here). */
function ReportTable({ rows, totals }: { rows: LifecycleReportRow[]; totals: LifecycleReportTotals }) {
  const lifetimes = lifetimeBars(totals);
  return (
    <>
      <div className="stat-grid" data-testid="report-totals">
        <Stat label={`Records (${totals.days} days)`} value={formatCount(totals.records)} testId="report-total-records" />
        <Stat label="Stored" value={formatBytes(totals.bytes)} testId="report-total-bytes" />
        <Stat label="Expired, not reclaimed" value={formatPercent(totals.expired_ratio)} testId="report-total-expired-ratio" />
        <Stat label="Duplicate keys" value={formatPercent(totals.duplicate_key_ratio)} testId="report-total-duplicate-ratio" />
        <Stat label="Compaction would reclaim" value={formatBytes(totals.superseded_bytes)} testId="report-total-reclaimable" />
      </div>
      <div className="table-wrap">
        <table className="table table-compact" data-testid="report-table">
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col" className="num">
                Records
              </th>
              <th scope="col" className="num">
                Stored
              </th>
              <th scope="col" className="num" title="Expired at report time but still stored">
                Expired, not reclaimed
              </th>
              <th scope="col" className="num" title="How long expired records have outlived their expiry: p50 / max">
                Past expiry p50 / max
              </th>
              <th scope="col" className="num" title="Effective expiry − timestamp, for records that expire">
                Lifetime p50 / p90 / p99
              </th>
              <th scope="col" className="num" title="Keyed records that a later record with the same key supersedes">
                Duplicate keys
              </th>
              <th scope="col" className="num">
                Reclaimable by compaction
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.day} data-testid={`report-row-${r.day}`}>
                <th scope="row">{formatReportDay(r.day)}</th>
                <td className="num">{formatCount(r.records)}</td>
                <td className="num">{formatBytes(r.bytes)}</td>
                <td className="num">
                  <Badge tone={expiredTone(r.expired_ratio)}>{formatPercent(r.expired_ratio)}</Badge>{" "}
                  <span className="muted small">({formatCount(r.expired_records)})</span>
                </td>
                <td className="num">
                  {formatReportDuration(r.overdue_p50_ms)} / {formatReportDuration(r.overdue_max_ms)}
                </td>
                <td className="num">{formatPercentiles([r.lifetime_p50_ms, r.lifetime_p90_ms, r.lifetime_p99_ms])}</td>
                <td className="num">{formatPercent(r.duplicate_key_ratio)}</td>
                <td className="num">{formatBytes(r.superseded_bytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <h2 className="section">Record lifetimes</h2>
      <p className="muted small">
        Records with an expiry, by lifetime, over the days shown; {formatCount(totals.unbounded_records)} records never expire.
      </p>
      <table className="table table-compact" data-testid="report-lifetimes">
        <tbody>
          {lifetimes.map((b) => (
            <tr key={b.key} data-testid={`report-lifetime-${b.key}`}>
              <th scope="row">{b.label}</th>
              <td className="num">{formatCount(b.records)}</td>
              <td className="num">{formatPercent(b.share)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function RunReportButton({ name, onDone }: { name: string; onDone: () => void }) {
  const start = useStartSparkJob();
  const run = useRun(start.data?.id ?? null);
  const current = run.data ?? start.data;
  const finished = current ? !isActiveRun(current) : false;
  useEffect(() => {
    if (finished && current?.state === "succeeded") onDone();
  }, [finished, current?.state]);
  const busy = start.isPending || (current !== undefined && !finished);
  return (
    <div className="action-bar">
      <button
        type="button"
        className="button"
        disabled={busy}
        onClick={() => start.mutate({ job: REPORT_JOB, namespace: name })}
        data-testid="report-run"
      >
        {busy ? "Report running…" : "Run report"}
      </button>
      {current && (
        <span className={current.state === "failed" ? "error-text small" : "small"} role="status" data-testid="report-run-status">
          {" "}
          Run <Link to={`/tasks?namespace=${encodeURIComponent(name)}`}>#{current.id}</Link> {current.state}
          {current.state === "failed" && current.error ? `: ${current.error.split("\n")[0]}` : ""}
        </span>
      )}
      {start.isError && (
        <span className="error-text small" role="alert" data-testid="report-run-error">
          {" "}
          {errorMessage(start.error)}
        </span>
      )}
    </div>
  );
}
