// Manual lifecycle actions on a namespace or a node (operator). Destructive
// ones ask the user to type the target's name; a real compaction first shows
// the dry-run estimate. Each start answers with a run (see Tasks). A dry run
// (offered where `dryRun` is set) runs the same decisions on the node and
// changes nothing: its finished run says what the action would do.

import { useState } from "react";
import { Link } from "react-router";
import { errorMessage, isNotFound } from "../../api/client";
import { useActions, useCompactionEstimate, useMe, useNamespaceAction, useNodeAction, useRun } from "../../api/queries";
import type { ActionInfo, NamespaceAction, NodeAction, TaskRun } from "../../api/types";
import { canOperate } from "../auth/roles";
import { formatBytes, formatCount } from "../../lib/format";
import { ConfirmByName } from "../../components/ConfirmByName";
import { runKindLabel } from "./Runs";
import { LoadingState } from "../../components/States";

type Scope = ActionInfo["scope"];
/** An action of one scope: its kind is one the scope's action request takes. */
type ScopedAction<S extends Scope> = Omit<ActionInfo, "kind"> & { kind: S extends "namespace" ? NamespaceAction : NodeAction };

/** The actions one scope offers, from the control plane's table (GET /api/actions). The schema types `kind`
 * as any action kind; the table gives each kind one scope, whose request takes exactly those kinds, and a
 * node also takes every sweeping namespace action (`sweeps`: run node-wide, over every namespace it hosts). */
function useScopedActions<S extends Scope>(
  scope: S,
): { actions: ScopedAction<S>[]; byKind: Map<string, ScopedAction<S>>; error: unknown } {
  const { data, error } = useActions();
  const actions = (data ?? []).filter(
    (a): a is ActionInfo & ScopedAction<S> => a.scope === scope || (scope === "node" && a.sweeps),
  );
  return { actions, byKind: new Map(actions.map((a) => [a.kind, a])), error };
}

/** A sweeping namespace action started on a node runs over every namespace the node hosts: say so. */
function nodeLabel(a: ActionInfo): string {
  return a.scope === "namespace" ? `${a.label} (every namespace)` : a.label;
}

/**
 * What a finished run did, or a dry run would do: the server's `run.summary` (one definition of what a run
 * affected), never recomputed here. A real run reports its counts the way its dry run does.
 */
function RunReport({ run }: { run: TaskRun }) {
  const dry = run.dry_run;
  const id = dry ? "dry-run" : "run"; // test ids: dry-run-report / run-report, …-records, …-segments, …-bytes
  const name = dry ? "Dry run" : "Run";
  if (run.state !== "succeeded") {
    return run.state === "failed" || run.state === "cancelled" ? (
      <p className="error-text small">
        {name} {run.state}
        {run.error ? `: ${run.error}` : ""}.
      </p>
    ) : (
      <p className="muted small">{name} in progress…</p>
    );
  }
  const { records, segments, bytes, pending_bytes: pending } = run.summary;
  const figure = (what: string, text: string) => <strong data-testid={`${id}-${what}`}>{text}</strong>;
  if (run.kind === "recall") {
    // A recall moves segments back to local disk: it frees nothing, it takes this much room.
    return (
      <p className="small" data-testid={`${id}-report`}>
        {dry ? "Dry run: it would recall " : "Done: it recalled "}
        {figure("segments", formatCount(segments))} segments ({figure("bytes", formatBytes(bytes))} of local disk) from
        the object store.{dry ? " Nothing was changed." : ""}
      </p>
    );
  }
  return (
    <p className="small" data-testid={`${id}-report`}>
      {dry ? "Dry run: it would affect " : "Done: it affected "}
      {figure("records", formatCount(records))} records and {figure("segments", formatCount(segments))} segments,
      and {dry ? "free" : "freed"} {figure("bytes", formatBytes(bytes))}
      {pending > 0 && (
        <>
          {" "}
          ({figure("pending", formatBytes(pending))} {dry ? "would wait" : "waiting"} on disk for deletion)
        </>
      )}
      .{dry ? " Nothing was changed." : ""}
    </p>
  );
}

function StartedRun({ run: started }: { run: TaskRun }) {
  const { data: live } = useRun(started.id); // polled while active, so the state shown is the current one
  const run = live ?? started;
  return (
    <div className="form-success" role="status" data-testid="action-result">
      Started run{" "}
      <Link to={`/tasks?run=${run.id}`} data-testid="action-run-link">
        <strong>#{run.id}</strong>
      </Link>{" "}
      ({runKindLabel(run.kind)}
      {run.dry_run ? ", dry run" : ""}) — state <span data-testid="action-run-state">{run.state}</span>.{" "}
      <Link to={`/tasks?run=${run.id}`}>Follow it on Tasks</Link>.
      <RunReport run={run} />
    </div>
  );
}

function ActionError({ error }: { error: unknown }) {
  return (
    <p className="form-error" role="alert" data-testid="action-error">
      {isNotFound(error)
        ? "Manual actions are not available yet on this server (the API answered 404)."
        : errorMessage(error)}
    </p>
  );
}

export function NamespaceActions({ name, onStarted }: { name: string; onStarted?: (run: TaskRun) => void }) {
  const { data: user } = useMe();
  const start = useNamespaceAction(name);
  const { actions, byKind, error } = useScopedActions("namespace");
  const [dryRun, setDryRun] = useState(false);
  const [confirming, setConfirming] = useState<NamespaceAction | null>(null);
  const estimate = useCompactionEstimate(name, confirming === "compaction");
  const confirmingInfo = confirming ? byKind.get(confirming) : undefined;

  if (!canOperate(user)) {
    return <p className="muted small">Starting actions needs the operator role.</p>;
  }

  const run = (action: NamespaceAction, confirm?: string) =>
    start.mutate(
      { action, dry_run: dryRun, ...(confirm !== undefined ? { confirm } : {}) },
      {
        onSuccess: (started) => {
          setConfirming(null);
          onStarted?.(started);
        },
      },
    );

  const onClick = (action: NamespaceAction) => {
    start.reset();
    const needsConfirm = Boolean(byKind.get(action)?.destructive) && !dryRun;
    if (needsConfirm) setConfirming(action);
    else {
      setConfirming(null);
      run(action);
    }
  };

  return (
    <div className="actions" data-testid="namespace-actions">
      {error ? <ActionError error={error} /> : null}
      <div className="action-bar">
        {actions.map((a) => (
          <button
            key={a.kind}
            type="button"
            className={`button${a.destructive && !dryRun ? " button-danger-outline" : ""}`}
            onClick={() => onClick(a.kind)}
            disabled={start.isPending || (dryRun && !a.dry_run)}
            title={a.help}
            aria-describedby={`ns-action-help-${a.kind}`}
            data-testid={`action-${a.kind}`}
          >
            {a.label}
            {dryRun && a.dry_run ? " (dry run)" : ""}
          </button>
        ))}
        <label className="check">
          <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} data-testid="action-dry-run" />
          Dry run (report only, change nothing)
        </label>
      </div>
      <ul className="muted small action-help">
        {actions.map((a) => (
          <li key={a.kind} id={`ns-action-help-${a.kind}`}>
            <strong>{a.label}:</strong> {a.help}
          </li>
        ))}
      </ul>

      {confirming && confirmingInfo && (
        <ConfirmByName
          key={confirming}
          name={name}
          title={`${confirmingInfo.label} on ${name}${dryRun ? " (dry run)" : ""}`}
          confirmLabel={`${confirmingInfo.label}${dryRun ? " (dry run)" : ""}`}
          pending={start.isPending}
          onConfirm={(typed) => run(confirming, typed)}
          onCancel={() => setConfirming(null)}
        >
          <p>{confirmingInfo.help}</p>
          {confirming === "compaction" && (
            <div data-testid="compaction-estimate">
              {estimate.isPending && <LoadingState label="Estimating what compaction would reclaim…" />}
              {estimate.isError &&
                (isNotFound(estimate.error) ? (
                  <p className="muted">No estimate: this server does not offer compaction estimates yet.</p>
                ) : (
                  <p className="error-text">Could not estimate: {errorMessage(estimate.error)}</p>
                ))}
              {estimate.data && (
                <dl className="kv">
                  <dt>Size now</dt>
                  <dd>{formatBytes(estimate.data.bytes_before)}</dd>
                  <dt>Size after</dt>
                  <dd>{formatBytes(estimate.data.bytes_after)}</dd>
                  <dt>Reclaimable</dt>
                  <dd>
                    <strong>{formatBytes(estimate.data.reclaimable_bytes)}</strong>
                  </dd>
                  <dt>Records removable</dt>
                  <dd>{formatCount(estimate.data.records_removable)}</dd>
                  {estimate.data.active_records_removable > 0 && (
                    <>
                      <dt>Waiting for the active segment</dt>
                      <dd data-testid="compaction-estimate-active">
                        {formatCount(estimate.data.active_records_removable)} records,{" "}
                        {formatBytes(estimate.data.active_bytes_reclaimable)}: removed once the active segment rolls
                        (by segment_ms, segment_bytes or the expired-share rule), not by this run
                      </dd>
                    </>
                  )}
                </dl>
              )}
            </div>
          )}
        </ConfirmByName>
      )}
      {start.isError && <ActionError error={start.error} />}
      {start.data && <StartedRun run={start.data} />}
    </div>
  );
}

export function NodeActions({ name, onStarted }: { name: string; onStarted?: (run: TaskRun) => void }) {
  const { data: user } = useMe();
  const start = useNodeAction(name);
  const { actions, byKind, error } = useScopedActions("node");
  const [confirming, setConfirming] = useState<NodeAction | null>(null);
  const [dryRun, setDryRun] = useState(false);
  const confirmingInfo = confirming ? byKind.get(confirming) : undefined;

  if (!canOperate(user)) {
    return <p className="muted small">Starting actions needs the operator role.</p>;
  }

  const onClick = (action: NodeAction) => {
    start.reset();
    if (byKind.get(action)?.destructive && !dryRun) setConfirming(action);
    else {
      setConfirming(null);
      start.mutate({ action, dry_run: dryRun }, { onSuccess: (started) => onStarted?.(started) });
    }
  };

  return (
    <div className="actions" data-testid="node-actions">
      {error ? <ActionError error={error} /> : null}
      <div className="action-bar">
        {actions.map((a) => (
          <button
            key={a.kind}
            type="button"
            className={`button${a.destructive && !dryRun ? " button-danger-outline" : ""}`}
            onClick={() => onClick(a.kind)}
            disabled={start.isPending || (dryRun && !a.dry_run)}
            title={a.help}
            data-testid={`action-${a.kind}`}
          >
            {nodeLabel(a)}
            {dryRun && a.dry_run ? " (dry run)" : ""}
          </button>
        ))}
        <label className="check">
          <input
            type="checkbox"
            checked={dryRun}
            onChange={(e) => setDryRun(e.target.checked)}
            data-testid="node-action-dry-run"
          />
          Dry run (report only, change nothing)
        </label>
      </div>
      <ul className="muted small action-help">
        {actions.map((a) => (
          <li key={a.kind}>
            <strong>{nodeLabel(a)}:</strong> {a.help}
          </li>
        ))}
      </ul>
      {confirming && confirmingInfo && (
        <ConfirmByName
          name={name}
          title={`${nodeLabel(confirmingInfo)} on node ${name}`}
          confirmLabel={confirmingInfo.label}
          pending={start.isPending}
          onConfirm={(typed) =>
            start.mutate(
              { action: confirming, confirm: typed },
              {
                onSuccess: (started) => {
                  setConfirming(null);
                  onStarted?.(started);
                },
              },
            )
          }
          onCancel={() => setConfirming(null)}
        >
          <p>{confirmingInfo.help}</p>
        </ConfirmByName>
      )}
      {start.isError && <ActionError error={start.error} />}
      {start.data && <StartedRun run={start.data} />}
    </div>
  );
}
