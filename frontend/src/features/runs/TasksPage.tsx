import { useEffect, useRef, useState } from "react";
import { useSearchParams } from "react-router";
import { errorMessage, isNotFound, type QueryValue } from "../../api/client";
import { isActiveRun, useCancelRun, useMe, useNamespaces, useNodes, useRun } from "../../api/queries";
import type { TaskRun } from "../../api/types";
import { canOperate } from "../auth/roles";
import { NamespaceActions, NodeActions } from "./Actions";
import { Field } from "../../components/Field";
import { ChangedNamespaces, FoldedSweeps } from "./RunFold";
import { formatRunCount, RUN_KIND_LABELS, runDuration, runKindLabel, RunsList } from "./Runs";
import { SparkJobPanel } from "./SparkJobs";
import { Badge, ErrorState, LoadingState, ProgressBar } from "../../components/States";
import { formatBytes, formatCount, formatDateTime, formatDuration } from "../../lib/format";
import { useNow, usePageTitle } from "../../lib/hooks";

const FILTER_KEYS = ["kind", "state", "namespace", "node", "active", "origin", "idle"] as const;
/** Quick views: manual runs are not buried under scheduled ones. */
const VIEWS = [
  { id: "all", label: "All", params: {} },
  { id: "manual", label: "Manual", params: { origin: "manual" } },
  { id: "scheduled", label: "Scheduled", params: { origin: "scheduled" } },
  { id: "failed", label: "Failed", params: { state: "failed" } },
] as const;

export default function TasksPage() {
  usePageTitle("Tasks");
  const [search, setSearch] = useSearchParams();
  const { data: user } = useMe();
  const namespaces = useNamespaces();
  const nodes = useNodes();

  const filters: Record<string, QueryValue> = {};
  for (const k of FILTER_KEYS) filters[k] = search.get(k) ?? undefined;

  const setFilter = (key: (typeof FILTER_KEYS)[number], value: string) => {
    const next = new URLSearchParams(search);
    if (value) next.set(key, value);
    else next.delete(key);
    setSearch(next, { replace: true });
  };

  const nsNames = (namespaces.data?.items ?? []).map((n) => n.name);
  const nodeNames = (nodes.data ?? []).map((n) => n.name);
  const runText = search.get("run");
  const openRun = runText && /^\d+$/.test(runText) ? Number(runText) : null;
  const open = (run: TaskRun) => {
    const next = new URLSearchParams(search);
    next.set("run", String(run.id));
    setSearch(next);
  };
  const close = () => {
    const next = new URLSearchParams(search);
    next.delete("run");
    setSearch(next, { replace: true });
  };
  // A quick view sets who started the runs and their state; the other filters stay.
  const VIEW_KEYS = ["origin", "state"] as const;
  const view = VIEWS.find((v) => VIEW_KEYS.every((k) => (search.get(k) ?? "") === ((v.params as Record<string, string>)[k] ?? "")))?.id;
  const setView = (params: Record<string, string>) => {
    const next = new URLSearchParams(search);
    for (const k of VIEW_KEYS) next.delete(k);
    for (const [k, v] of Object.entries(params)) next.set(k, v);
    setSearch(next, { replace: true });
  };

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Tasks</h1>
          <p className="muted">Lifecycle runs (scheduled and manual). Active runs update live.</p>
        </div>
      </div>

      {openRun !== null && <RunDetail key={openRun} id={openRun} onClose={close} />}
      {canOperate(user) && <StartActionPanel namespaces={nsNames} nodes={nodeNames} onStarted={open} />}
      {canOperate(user) && <SparkJobPanel namespaces={nsNames} onStarted={open} />}

      <div className="toolbar">
        <div className="segmented" role="group" aria-label="Show runs">
          {VIEWS.map((v) => (
            <button key={v.id} type="button" aria-pressed={view === v.id} onClick={() => setView(v.params)} data-testid={`runs-view-${v.id}`}>
              {v.label}
            </button>
          ))}
        </div>
        <span className="muted small" data-testid="runs-fold-hint">
          Scheduled sweeps are folded into one row per kind, target and time window (an hour unless configured), their counts summed;
          windows in which they found nothing to do are hidden unless you show them.
        </span>
      </div>
      <div className="filters" role="search" aria-label="Run filters">
        <Field id="runs-origin" label="Started by">
          <select id="runs-origin" value={search.get("origin") ?? ""} onChange={(e) => setFilter("origin", e.target.value)} data-testid="runs-filter-origin">
            <option value="">anyone</option>
            <option value="manual">a person (manual)</option>
            <option value="scheduled">a schedule</option>
          </select>
        </Field>
        <Field id="runs-kind" label="Kind">
          <select id="runs-kind" value={search.get("kind") ?? ""} onChange={(e) => setFilter("kind", e.target.value)} data-testid="runs-filter-kind">
            <option value="">any</option>
            {Object.entries(RUN_KIND_LABELS).map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </Field>
        <Field id="runs-state" label="State">
          <select id="runs-state" value={search.get("state") ?? ""} onChange={(e) => setFilter("state", e.target.value)} data-testid="runs-filter-state">
            <option value="">any</option>
            {["queued", "running", "succeeded", "failed", "cancelled"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </Field>
        <Field id="runs-namespace" label="Namespace">
          <select
            id="runs-namespace"
            value={search.get("namespace") ?? ""}
            onChange={(e) => setFilter("namespace", e.target.value)}
            data-testid="runs-filter-namespace"
          >
            <option value="">any</option>
            {withCurrent(nsNames, search.get("namespace")).map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </Field>
        <Field id="runs-node" label="Node">
          <select id="runs-node" value={search.get("node") ?? ""} onChange={(e) => setFilter("node", e.target.value)} data-testid="runs-filter-node">
            <option value="">any</option>
            {withCurrent(nodeNames, search.get("node")).map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </Field>
        <Field id="runs-idle" label="Idle sweeps">
          <select id="runs-idle" value={search.get("idle") ?? ""} onChange={(e) => setFilter("idle", e.target.value)} data-testid="runs-filter-idle">
            <option value="">hidden</option>
            <option value="true">shown</option>
          </select>
        </Field>
        <Field id="runs-active" label="Activity">
          <select id="runs-active" value={search.get("active") ?? ""} onChange={(e) => setFilter("active", e.target.value)} data-testid="runs-filter-active">
            <option value="">all</option>
            <option value="true">active only</option>
            <option value="false">finished only</option>
          </select>
        </Field>
      </div>
      <RunsList filters={filters} highlight={openRun} />
    </div>
  );
}

/** One run, opened with `?run=<id>`: everything about it, live while it is active. */
function RunDetail({ id, onClose }: { id: number; onClose: () => void }) {
  const run = useRun(id);
  const { data: user } = useMe();
  const cancel = useCancelRun();
  const now = useNow(1000);
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    ref.current?.scrollIntoView?.({ block: "nearest" });
    ref.current?.focus();
  }, []);
  let body;
  if (run.isPending) body = <LoadingState label={`Loading run #${id}…`} />;
  else if (run.isError && !run.data) {
    body = isNotFound(run.error) ? (
      <p className="muted">
        Run #{id} does not exist (any more): a scheduled sweep is folded into the row of its kind, target and time window when it finishes.
      </p>
    ) : (
      <ErrorState title={`Could not load run #${id}`} error={run.error} onRetry={() => void run.refetch()} />
    );
  } else {
    const r = run.data!;
    const active = isActiveRun(r);
    const dur = runDuration(r, now);
    body = (
      <>
        <p>
          <Badge tone={r.state === "succeeded" ? "ok" : r.state === "failed" ? "fail" : r.state === "running" ? "warn" : "neutral"} testId="run-detail-state">
            {r.state}
          </Badge>{" "}
          {r.namespace ? (
            <span className="mono">
              {r.namespace}
              {r.shard != null ? ` / shard ${r.shard}` : ""}
            </span>
          ) : (
            <span className="mono">{r.node ? `node ${r.node}` : "cluster"}</span>
          )}{" "}
          <span className="muted small">
            {r.started_by ? `started by ${r.started_by}` : r.schedule ? `scheduled: ${r.schedule}` : "started by the system"}
          </span>
        </p>
        {(active || r.progress > 0) && <ProgressBar value={r.progress} label={`Run ${r.id} progress`} testId="run-detail-progress" />}
        {r.error && (
          <p className="error-text small" data-testid="run-detail-error">
            {r.error}
          </p>
        )}
        <FoldedSweeps run={r} />
        <ChangedNamespaces run={r} />
        <dl className="kv small" data-testid="run-detail-counts">
          <dt>Queued</dt>
          <dd>{formatDateTime(r.created_at)}</dd>
          <dt>Started</dt>
          <dd>{r.started_at ? formatDateTime(r.started_at) : "not yet"}</dd>
          <dt>Finished</dt>
          <dd>{r.finished_at ? formatDateTime(r.finished_at) : active ? "still going" : "—"}</dd>
          <dt>Duration</dt>
          <dd>{dur === null ? "—" : formatDuration(dur)}</dd>
          <dt>Steps</dt>
          <dd>{formatCount(r.steps)}</dd>
          {Object.entries(r.counts ?? {}).map(([k, v]) => (
            <div key={k} style={{ display: "contents" }}>
              <dt>{k.replace(/_/g, " ")}</dt>
              <dd>{formatRunCount(k, v)}</dd>
            </div>
          ))}
          <dt title="bytes actually freed: files removed, not only renamed .deleted">Freed</dt>
          <dd data-testid="run-detail-freed">{formatBytes(r.bytes_reclaimed)}</dd>
          <dt title="deleted, still on disk as .deleted files (file_delete_delay_ms, or a reader holds them)">
            Pending deletion
          </dt>
          <dd data-testid="run-detail-pending">{formatBytes(r.summary.pending_bytes)}</dd>
        </dl>
        {active && canOperate(user) && (
          <button
            type="button"
            className="button button-small"
            disabled={r.cancel_requested || cancel.isPending}
            onClick={() => cancel.mutate(r.id, { onSuccess: () => void run.refetch() })}
            data-testid="run-detail-cancel"
          >
            {r.cancel_requested ? "Cancelling…" : "Cancel"}
          </button>
        )}
        {cancel.isError && (
          <p className="error-text small" role="alert">
            {errorMessage(cancel.error)}
          </p>
        )}
      </>
    );
  }
  return (
    <section className="card section" aria-labelledby="run-detail-title" data-testid="run-detail" ref={ref} tabIndex={-1}>
      <div className="card-head">
        <h2 id="run-detail-title">
          Run #{id}
          {run.data ? ` · ${runKindLabel(run.data.kind)}` : ""}
        </h2>
        <button type="button" className="button button-small" onClick={onClose} data-testid="run-detail-close">
          Close
        </button>
      </div>
      {body}
    </section>
  );
}

function withCurrent(names: string[], current: string | null): string[] {
  return current && !names.includes(current) ? [current, ...names] : names;
}

function StartActionPanel({
  namespaces,
  nodes,
  onStarted,
}: {
  namespaces: string[];
  nodes: string[];
  onStarted: (run: TaskRun) => void;
}) {
  const [kind, setKind] = useState<"namespace" | "node">("namespace");
  const [target, setTarget] = useState("");
  const names = kind === "namespace" ? namespaces : nodes;
  const chosen = names.includes(target) ? target : "";
  return (
    <section className="card section" aria-labelledby="start-action-title" data-testid="start-action-panel">
      <h2 id="start-action-title">Start an action</h2>
      <div className="toolbar" style={{ marginTop: 8 }}>
        <div className="segmented" role="group" aria-label="Target type">
          {(["namespace", "node"] as const).map((k) => (
            <button
              key={k}
              type="button"
              aria-pressed={kind === k}
              onClick={() => {
                setKind(k);
                setTarget("");
              }}
              data-testid={`start-target-${k}`}
            >
              {k === "namespace" ? "Namespace" : "Node"}
            </button>
          ))}
        </div>
        <label className="check" htmlFor="start-target">
          {kind === "namespace" ? "Namespace" : "Node"}
        </label>
        <select id="start-target" value={chosen} onChange={(e) => setTarget(e.target.value)} data-testid="start-target">
          <option value="">choose…</option>
          {names.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </div>
      {!chosen ? (
        <p className="muted small">
          {names.length === 0 ? `No ${kind}s to act on yet.` : `Choose a ${kind} to see its actions.`}
        </p>
      ) : kind === "namespace" ? (
        <NamespaceActions key={chosen} name={chosen} onStarted={onStarted} />
      ) : (
        <NodeActions key={chosen} name={chosen} onStarted={onStarted} />
      )}
    </section>
  );
}
