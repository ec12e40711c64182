import { useState } from "react";
import { useSearchParams } from "react-router";
import type { QueryValue } from "../api/client";
import { useMe, useNamespaces, useNodes } from "../api/queries";
import { canOperate } from "../auth/roles";
import { NamespaceActions, NodeActions } from "../components/Actions";
import { Field } from "../components/Field";
import { RUN_KIND_LABELS, RunsList } from "../components/Runs";
import { SparkJobPanel } from "../components/SparkJobs";
import { usePageTitle } from "../lib/hooks";

const FILTER_KEYS = ["kind", "state", "namespace", "node", "active"] as const;

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

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Tasks</h1>
          <p className="muted">Lifecycle runs (scheduled and manual). Active runs update live.</p>
        </div>
      </div>

      {canOperate(user) && <StartActionPanel namespaces={nsNames} nodes={nodeNames} />}
      {canOperate(user) && <SparkJobPanel namespaces={nsNames} />}

      <div className="filters" role="search" aria-label="Run filters">
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
        <Field id="runs-active" label="Activity">
          <select id="runs-active" value={search.get("active") ?? ""} onChange={(e) => setFilter("active", e.target.value)} data-testid="runs-filter-active">
            <option value="">all</option>
            <option value="true">active only</option>
            <option value="false">finished only</option>
          </select>
        </Field>
      </div>
      <RunsList filters={filters} />
    </div>
  );
}

function withCurrent(names: string[], current: string | null): string[] {
  return current && !names.includes(current) ? [current, ...names] : names;
}

function StartActionPanel({ namespaces, nodes }: { namespaces: string[]; nodes: string[] }) {
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
        <NamespaceActions key={chosen} name={chosen} />
      ) : (
        <NodeActions key={chosen} name={chosen} />
      )}
    </section>
  );
}
