import { useState, type FormEvent } from "react";
import { ApiError, isNotFound } from "../../api/client";
import { FIGURES_REFRESH_MS, useCreateNode, useDeleteNode, useMe, useMetricsSummary, useNodes } from "../../api/queries";
import type { NodeDisk, StorageNode } from "../../api/types";
import { canAdminister } from "../auth/roles";
import { NodeActions } from "../runs/Actions";
import { ConfirmByName } from "../../components/ConfirmByName";
import { DiskBar } from "./Disk";
import { TIER_HELP, TierBytes } from "../../components/Tiers";
import { NodeHealthBadge, nodeHealthOf } from "./NodeHealth";
import { FieldMessage, formLevelMessage } from "../../components/Form";
import { PolicyPanel } from "../policies/PolicyEditor";
import { EmptyState, ErrorState, LoadingState } from "../../components/States";
import { tabPanelId, Tabs } from "../../components/Tabs";
import { useNow, usePageTitle } from "../../lib/hooks";
import { TimeCell } from "../../components/TimeCell";

type NodeTab = "policy" | "actions" | "danger";

export default function NodesPage() {
  usePageTitle("Nodes");
  const { data: user } = useMe();
  const nodes = useNodes({ refetchInterval: FIGURES_REFRESH_MS });
  // Health, last seen and disk: the metrics collection's, as on the Overview.
  const metrics = useMetricsSummary({ refetchInterval: FIGURES_REFRESH_MS });
  const [selected, setSelected] = useState<string | null>(null);
  const now = useNow(30_000);
  const disks = new Map<string, NodeDisk>((metrics.data?.nodes ?? []).map((d) => [d.name, d]));
  const list = nodes.data ?? [];
  const current = list.find((n) => n.name === selected) ?? null;

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Nodes</h1>
          <p className="muted">
            Storage nodes: health and disk as the last metrics collection found them (as on the Overview), node policy
            and actions.
          </p>
        </div>
      </div>
      {canAdminister(user) && <AddNodeForm />}
      {metrics.isError && (
        <p className="muted small" data-testid="nodes-metrics-note">
          {isNotFound(metrics.error)
            ? "Disk figures are not available yet on this server (metrics API missing)."
            : "Disk figures could not be loaded; showing the rest."}
        </p>
      )}
      {nodes.isPending && <LoadingState label="Loading nodes…" />}
      {nodes.isError && !nodes.data && (
        <ErrorState title="Could not load nodes" error={nodes.error} onRetry={() => void nodes.refetch()} retrying={nodes.isFetching} />
      )}
      {nodes.data && list.length === 0 && (
        <EmptyState title="No nodes registered">
          {canAdminister(user) ? "Add the first storage node with the form above." : "Ask an admin to add a storage node."}
        </EmptyState>
      )}
      {list.length > 0 && (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="nodes-table">
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Health</th>
                <th scope="col">Last seen</th>
                <th scope="col">Disk</th>
                <th scope="col" title={TIER_HELP}>
                  Local / remote only
                </th>
                <th scope="col">
                  <span className="visually-hidden">Open</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((n) => (
                <tr key={n.name} data-testid={`node-row-${n.name}`} className={n.name === selected ? "is-selected" : undefined}>
                  <th scope="row">
                    <span className="mono">{n.name}</span>
                    <div className="muted small mono">{n.url}</div>
                    <div className="muted small">{n.has_token ? "token set" : "no token"}</div>
                  </th>
                  <td>
                    <NodeHealthBadge node={healthOf(n, disks.get(n.name))} testId={`node-health-${n.name}`} />
                    {nodeHealthOf(healthOf(n, disks.get(n.name))) === "unhealthy" && healthOf(n, disks.get(n.name)).error && (
                      <div className="error-text small">{healthOf(n, disks.get(n.name)).error}</div>
                    )}
                  </td>
                  <td data-testid={`node-last-seen-${n.name}`}>
                    <TimeCell
                      value={healthOf(n, disks.get(n.name)).last_seen_at}
                      now={now}
                      never={nodeHealthOf(healthOf(n, disks.get(n.name))) === "unknown" ? "not checked yet" : "never"}
                    />
                  </td>
                  <td style={{ minWidth: 280 }}>
                    {disks.get(n.name) ? (
                      <DiskBar disk={disks.get(n.name)!} minHistoryS={metrics.data?.forecast_min_history_s} />
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                  <td className="small">
                    <TierBytes
                      local={disks.get(n.name)?.local_bytes}
                      remoteOnly={disks.get(n.name)?.remote_only_bytes}
                      testId={`node-tiers-${n.name}`}
                    />
                  </td>
                  <td>
                    <button
                      type="button"
                      className="button button-small"
                      aria-expanded={n.name === selected}
                      onClick={() => setSelected((s) => (s === n.name ? null : n.name))}
                      data-testid={`node-open-${n.name}`}
                    >
                      {n.name === selected ? "Close" : "Policy & actions"}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {current && <NodePanel key={current.name} node={current} onDeleted={() => setSelected(null)} />}
    </div>
  );
}

type NodeHealthEntry = Pick<NodeDisk, "health" | "checked_at" | "last_seen_at" | "error">;

/**
 * The node's health as the metrics summary gives it (the Overview's); a server without it in the summary
 * has the node row, written by the same collection: healthy, or its error, and "not checked" otherwise.
 */
function healthOf(n: StorageNode, disk: NodeDisk | undefined): NodeHealthEntry {
  if (disk?.health) return disk;
  const health = n.healthy ? "healthy" : n.last_error ? "unhealthy" : "unknown";
  return { health, checked_at: null, last_seen_at: n.last_seen_at, error: n.last_error };
}

function NodePanel({ node, onDeleted }: { node: StorageNode; onDeleted: () => void }) {
  const { data: user } = useMe();
  const [tab, setTab] = useState<NodeTab>("policy");
  const del = useDeleteNode();
  const tabs: { value: NodeTab; label: string }[] = [
    { value: "policy", label: "Node policy" },
    { value: "actions", label: "Actions" },
  ];
  if (canAdminister(user)) tabs.push({ value: "danger", label: "Remove" });
  return (
    <section className="section" aria-labelledby="node-panel-title" data-testid={`node-panel-${node.name}`}>
      <h2 id="node-panel-title">
        Node <span className="mono">{node.name}</span>
      </h2>
      <Tabs tabs={tabs} value={tab} onChange={setTab} label="Node sections" idPrefix="node" />
      <div role="tabpanel" id={tabPanelId("node", tab)} aria-labelledby={`node-tab-${tab}`}>
        {tab === "policy" && <PolicyPanel scope={{ kind: "node", name: node.name }} />}
        {tab === "actions" && <NodeActions name={node.name} />}
        {tab === "danger" && (
          <ConfirmByName
            name={node.name}
            title={`Remove node ${node.name} from the console`}
            confirmLabel="Remove node"
            pending={del.isPending}
            error={del.error}
            onCancel={() => setTab("policy")}
            onConfirm={() => del.mutate(node.name, { onSuccess: onDeleted })}
          >
            <p>The console stops managing this node. Data on the node is not deleted.</p>
          </ConfirmByName>
        )}
      </div>
    </section>
  );
}

function AddNodeForm() {
  const create = useCreateNode();
  const [form, setForm] = useState({ name: "", url: "", token: "" });
  const [local, setLocal] = useState<Record<string, string[]>>({});
  const serverErrors = create.error instanceof ApiError ? create.error.fieldErrors : {};
  const errors = { ...serverErrors, ...local };
  const formMessage = formLevelMessage(create.error, new Set(["name", "url", "token"]));

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    create.reset(); // the last "Added node" never stands beside this attempt's errors
    const errs: Record<string, string[]> = {};
    if (!form.name.trim()) errs.name = ["Enter a name."];
    if (!/^https?:\/\/\S+$/.test(form.url.trim())) errs.url = ["Enter the node's base URL, e.g. http://node-1:9000."];
    setLocal(errs);
    if (Object.keys(errs).length) return;
    create.mutate(
      { name: form.name.trim(), url: form.url.trim(), token: form.token },
      { onSuccess: () => setForm({ name: "", url: "", token: "" }) },
    );
  };
  const input = (key: "name" | "url" | "token", label: string, hint: string, type = "text") => (
    <div className={`field${key === "url" ? "" : " field-medium"}`}>
      <label htmlFor={`node-${key}`}>{label}</label>
      <input
        id={`node-${key}`}
        type={type}
        value={form[key]}
        autoComplete="off"
        onChange={(e) => {
          setForm((f) => ({ ...f, [key]: e.target.value }));
          setLocal(({ [key]: _d, ...rest }) => rest);
          if (create.isError) create.reset();
        }}
        aria-invalid={errors[key] ? true : undefined}
        data-testid={`add-node-${key}`}
      />
      <FieldMessage id={`node-${key}`} errors={errors[key]} hint={hint} />
    </div>
  );
  return (
    <section className="card create-card" aria-labelledby="add-node-title">
      <h2 id="add-node-title">Add node</h2>
      <form className="inline-form" onSubmit={onSubmit} noValidate>
        {input("name", "Name", "e.g. node-1")}
        {input("url", "URL", "Base URL of the node's API.")}
        {input("token", "Token", "Shared secret; stored, never shown again.", "password")}
        <div className="field field-action">
          <button type="submit" className="button button-primary" disabled={create.isPending} data-testid="add-node-submit">
            {create.isPending ? "Adding…" : "Add node"}
          </button>
        </div>
      </form>
      {formMessage && (
        <p className="form-error" role="alert" data-testid="add-node-error">
          {formMessage}
        </p>
      )}
      {create.isSuccess && (
        <p className="form-success" role="status" data-testid="add-node-success">
          Added node <strong>{create.data.name}</strong>.
        </p>
      )}
    </section>
  );
}
