import { useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { errorMessage, isNotFound } from "../api/client";
import { useDeleteNamespace, useMe, useNamespace, useNamespaceSummary, useSyncNamespace } from "../api/queries";
import { canAdminister, canOperate } from "../auth/roles";
import { NamespaceActions } from "../components/Actions";
import { ConfirmByName } from "../components/ConfirmByName";
import { PolicyPanel } from "../components/PolicyEditor";
import { RunsList } from "../components/Runs";
import { SegmentsList } from "../components/Segments";
import { Badge, EmptyState, ErrorState, LoadingState } from "../components/States";
import { tabPanelId, Tabs } from "../components/Tabs";
import { formatBytes, formatCount, formatPercent } from "../lib/format";
import { useNow, usePageTitle } from "../lib/hooks";
import { SYNC_TONE, TimeCell } from "./NamespacesPage";

const TABS = [
  { value: "overview", label: "Overview" },
  { value: "policy", label: "Policy" },
  { value: "segments", label: "Segments" },
  { value: "runs", label: "Runs" },
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
            {n.shards} shard{n.shards === 1 ? "" : "s"} on {n.node ?? "no node"} ·{" "}
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
        {tab === "overview" && <SummaryPanel name={n.name} />}
        {tab === "policy" && <PolicyPanel scope={{ kind: "namespace", name: n.name }} />}
        {tab === "segments" && (
          <SegmentsList filters={{ namespace: n.name, ordering: "-max_timestamp", page_size: 50 }} emptyHint="No segments in the catalog yet: sync the namespace." />
        )}
        {tab === "runs" && <RunsList filters={{ namespace: n.name }} emptyHint="No lifecycle runs for this namespace yet." />}
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

function Stat({ label, value, testId }: { label: string; value: string; testId?: string }) {
  return (
    <div className="stat" data-testid={testId}>
      <div className="stat-label">{label}</div>
      <div className="stat-value">{value}</div>
    </div>
  );
}

function SummaryPanel({ name }: { name: string }) {
  const summary = useNamespaceSummary(name);
  const now = useNow(30_000);
  if (summary.isPending) return <LoadingState label="Loading usage…" />;
  if (summary.isError && !summary.data) {
    return <ErrorState title="Could not load usage" error={summary.error} onRetry={() => void summary.refetch()} />;
  }
  const s = summary.data;
  return (
    <>
      <div className="stat-grid" data-testid="namespace-summary">
        <Stat label="Stored" value={formatBytes(s.stored_bytes)} testId="summary-stored-bytes" />
        <Stat label="Records" value={formatCount(s.stored_records)} testId="summary-records" />
        <Stat label="Live records" value={formatCount(s.live_records)} />
        <Stat label="Expired ratio" value={formatPercent(s.expired_ratio)} testId="summary-expired-ratio" />
        <Stat label="Segments" value={formatCount(s.segment_count)} />
        <Stat label="Backlog" value={s.backlog_messages == null ? "—" : `${formatCount(s.backlog_messages)} msgs`} />
      </div>
      <dl className="kv small">
        <dt>Last TTL scan</dt>
        <dd>
          <TimeCell value={s.last_scan_at} now={now} never="never" />
        </dd>
        <dt>Last compaction</dt>
        <dd>
          <TimeCell value={s.last_compaction_at} now={now} never="never" />
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
                  Size
                </th>
                <th scope="col" className="num">
                  Segments
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
                  <td className="num">{formatCount(sh.log_start_offset)}</td>
                  <td className="num">{formatCount(sh.end_offset)}</td>
                  <td className="num">
                    {formatCount(sh.record_count)} <span className="muted small">({formatCount(sh.live_count)})</span>
                  </td>
                  <td className="num">{formatBytes(sh.size_bytes)}</td>
                  <td className="num">{formatCount(sh.segment_count)}</td>
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
