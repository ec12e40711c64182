import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { ApiError, errorMessage } from "../../api/client";
import { FIGURES_REFRESH_MS, useCreateNamespace, useMe, useNamespaces, useNodes } from "../../api/queries";
import type { FieldErrors, NamespaceCreate, NamespaceListRow, SyncState } from "../../api/types";
import { canAdminister } from "../auth/roles";
import { FieldMessage, formLevelMessage } from "../../components/Form";
import { SortHeader } from "../../components/SortHeader";
import { TierBytes } from "../../components/Tiers";
import { Badge, EmptyState, ErrorState, LoadingState } from "../../components/States";
import { TimeCell } from "../../components/TimeCell";
import {
  formatBytes,
  formatCount,
  formatPercent,
  tryParseDuration,
} from "../../lib/format";
import { useNow, usePageTitle } from "../../lib/hooks";
import { NAME_HINT, nameProblem } from "./names";
import { placedOn, SPREAD, spreadPlacement } from "./placement";
import { SYNC_TONE } from "./sync";
import { nextSort, sortRows, type SortState } from "../../lib/table";

// Mirrors storage_engine/rules/validation.py; the server remains the authority.
const MAX_SHARDS = 1024;

export function NamespacesPage() {
  usePageTitle("Namespaces");
  const { data: user } = useMe();
  // Usage figures come from the metrics collection, refreshed every metrics interval.
  const namespaces = useNamespaces({ refetchInterval: FIGURES_REFRESH_MS });
  const mayCreate = canAdminister(user);
  const now = useNow(30_000);

  const items = namespaces.data?.items ?? [];

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Namespaces</h1>
          <p className="muted">Topics stored by the engine, each split into shards.</p>
        </div>
        {namespaces.data && (
          <span className="muted" aria-live="polite">
            {items.length} namespace{items.length === 1 ? "" : "s"}
            {namespaces.isFetching ? " · refreshing…" : ""}
          </span>
        )}
      </div>

      {mayCreate ? (
        <CreateNamespaceForm />
      ) : (
        user && (
          <p className="muted small">
            Your role ({user.role}) can view namespaces; creating one needs the admin role.
          </p>
        )
      )}

      <section aria-labelledby="ns-list-title" className="section">
        <h2 id="ns-list-title" className="visually-hidden">
          Namespace list
        </h2>
        {namespaces.isPending && <LoadingState label="Loading namespaces…" />}
        {namespaces.isError && !namespaces.data && (
          <ErrorState
            title="Could not load namespaces"
            error={namespaces.error}
            onRetry={() => void namespaces.refetch()}
            retrying={namespaces.isFetching}
          />
        )}
        {namespaces.isError && namespaces.data && (
          <div className="banner banner-warn" role="alert">
            Could not refresh the list: {errorMessage(namespaces.error)}
          </div>
        )}
        {namespaces.data && items.length === 0 && (
          <EmptyState title="No namespaces yet">
            {mayCreate
              ? "Create the first one with the form above: pick a name and a shard count."
              : "Ask an admin to create one."}
          </EmptyState>
        )}
        {items.length > 0 && <NamespaceTable items={items} now={now} />}
        {namespaces.data?.truncated && (
          <p className="muted small">Showing the first {items.length} namespaces; the list was cut off.</p>
        )}
      </section>
    </div>
  );
}


type NsSortKey =
  | "name"
  | "shards"
  | "stored_bytes"
  | "stored_records"
  | "remote_only_bytes"
  | "expired_ratio"
  | "segment_count"
  | "last_scan_at"
  | "last_compaction_at"
  | "sync_state";

function NamespaceTable({ items, now }: { items: NamespaceListRow[]; now: number }) {
  const [sort, setSort] = useState<SortState<NsSortKey>>({ key: "name", dir: "asc" });
  const [filter, setFilter] = useState("");
  const [syncFilter, setSyncFilter] = useState<"" | SyncState>("");
  const needle = filter.trim().toLowerCase();
  const visible = items.filter(
    (n) => (!needle || n.name.toLowerCase().includes(needle)) && (!syncFilter || n.sync_state === syncFilter),
  );
  const sorted = sortRows(visible, sort, (row, key) => row[key]);
  const onSort = (key: NsSortKey) => setSort((s) => nextSort(s, key, key === "name" ? "asc" : "desc"));
  const header = (label: string, key: NsSortKey, numeric = false) => (
    <SortHeader label={label} sortKey={key} sort={sort} onSort={onSort} numeric={numeric} />
  );
  return (
    <>
      <div className="filters" role="search">
        <div className="field field-wide">
          <label htmlFor="ns-filter">Filter by name</label>
          <input
            id="ns-filter"
            value={filter}
            onChange={(e) => setFilter(e.target.value)}
            placeholder="e.g. orders"
            data-testid="namespace-filter"
          />
        </div>
        <div className="field">
          <label htmlFor="ns-sync-filter">Sync state</label>
          <select
            id="ns-sync-filter"
            value={syncFilter}
            onChange={(e) => setSyncFilter(e.target.value as "" | SyncState)}
            data-testid="namespace-sync-filter"
          >
            <option value="">any</option>
            <option value="synced">synced</option>
            <option value="pending">pending</option>
            <option value="failed">failed</option>
          </select>
        </div>
        <span className="muted small">
          {visible.length} of {items.length} shown
        </span>
      </div>
      {sorted.length === 0 ? (
        <EmptyState title="No namespace matches the filter">Clear the filter to see all namespaces.</EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="namespaces-table">
            <thead>
              <tr>
                {header("Name", "name")}
                {header("Shards", "shards", true)}
                {header("Size", "stored_bytes", true)}
                {header("Records", "stored_records", true)}
                {header("Local / remote only", "remote_only_bytes", true)}
                {header("Expired", "expired_ratio", true)}
                {header("Segments", "segment_count", true)}
                {header("Last scan", "last_scan_at")}
                {header("Last compaction", "last_compaction_at")}
                {header("Sync", "sync_state")}
              </tr>
            </thead>
            <tbody>
              {sorted.map((ns) => (
                <tr key={ns.name} data-testid={`namespace-row-${ns.name}`}>
                  <th scope="row" className="mono">
                    <Link to={`/namespaces/${encodeURIComponent(ns.name)}`} data-testid={`namespace-link-${ns.name}`}>
                      {ns.name}
                    </Link>
                    <div className="muted small">{placedOn(ns)}</div>
                  </th>
                  <td className="num">{ns.shards}</td>
                  <td className="num" data-testid={`namespace-size-${ns.name}`}>
                    {formatBytes(ns.stored_bytes)}
                  </td>
                  <td className="num" data-testid={`namespace-records-${ns.name}`}>
                    {formatCount(ns.stored_records)}
                  </td>
                  <td className="num">
                    <TierBytes local={ns.local_bytes} remoteOnly={ns.remote_only_bytes} testId={`namespace-tiers-${ns.name}`} />
                  </td>
                  <td className="num" data-testid={`namespace-expired-${ns.name}`}>
                    <span className={(ns.expired_ratio ?? 0) > 0.2 ? "fail-text" : undefined}>
                      {formatPercent(ns.expired_ratio)}
                    </span>
                  </td>
                  <td className="num" data-testid={`namespace-segments-${ns.name}`}>
                    {formatCount(ns.segment_count)}
                  </td>
                  <td>
                    <TimeCell value={ns.last_scan_at} now={now} never="never" />
                  </td>
                  <td>
                    <TimeCell value={ns.last_compaction_at} now={now} never="never" />
                  </td>
                  <td>
                    <Badge tone={SYNC_TONE[ns.sync_state] ?? "neutral"}>{ns.sync_state}</Badge>
                    {ns.sync_error && <div className="error-text small">{ns.sync_error}</div>}
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

/** Optional policy fields on the create form: field → typed duration. */
type CreatePolicyText = { ttl_ms: string; retention_ms: string };

function validate(name: string, shards: string, policy: CreatePolicyText): FieldErrors {
  const errors: FieldErrors = {};
  for (const [field, text] of Object.entries(policy)) {
    if (!text.trim()) continue;
    const parsed = tryParseDuration(text);
    if (!parsed.ok) errors[field] = [parsed.error];
  }
  const nameError = nameProblem(name);
  if (nameError) errors.name = [nameError];
  const n = Number(shards);
  if (!shards.trim()) errors.shards = ["Enter a shard count."];
  else if (!Number.isInteger(n) || n < 1 || n > MAX_SHARDS) errors.shards = [`Use a whole number from 1 to ${MAX_SHARDS}.`];
  return errors;
}

function CreateNamespaceForm() {
  const create = useCreateNamespace();
  const nodes = useNodes();
  const nodeNames = (nodes.data ?? []).map((n) => n.name);
  const [name, setName] = useState("");
  const [shards, setShards] = useState("1");
  const [placeOn, setPlaceOn] = useState(""); // "" = the default node, a node name, or SPREAD
  const [policyText, setPolicyText] = useState<CreatePolicyText>({ ttl_ms: "", retention_ms: "" });
  const [localErrors, setLocalErrors] = useState<FieldErrors>({});
  const [created, setCreated] = useState<string | null>(null);

  const serverError = create.error instanceof ApiError ? create.error : null;
  const fieldErrors: FieldErrors = { ...(serverError?.fieldErrors ?? {}), ...localErrors };
  // The server may name policy fields bare or as "policy.<field>".
  for (const [key, msgs] of Object.entries(serverError?.fieldErrors ?? {})) {
    if (key.startsWith("policy.")) fieldErrors[key.slice(7)] = msgs;
  }
  const known = new Set(["name", "shards", "node", "placement", "ttl_ms", "retention_ms", "policy.ttl_ms", "policy.retention_ms"]);
  const formMessage = formLevelMessage(create.error, known);

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const trimmed = name.trim();
    const errors = validate(trimmed, shards, policyText);
    setLocalErrors(errors);
    setCreated(null);
    if (Object.keys(errors).length > 0) {
      create.reset();
      return;
    }
    const body: NamespaceCreate = { name: trimmed, shards: Number(shards) };
    if (placeOn === SPREAD) body.placement = spreadPlacement(nodeNames, Number(shards));
    else if (placeOn) body.node = placeOn;
    const policy: Record<string, number | null> = {};
    for (const [field, text] of Object.entries(policyText)) {
      const parsed = text.trim() ? tryParseDuration(text) : null;
      if (parsed?.ok) policy[field] = parsed.value; // null: infinite
    }
    if (Object.keys(policy).length > 0) body.policy = policy;
    create.mutate(
      body,
      {
        onSuccess: (ns) => {
          setCreated(ns.name);
          setName("");
          setShards("1");
          setPolicyText({ ttl_ms: "", retention_ms: "" });
        },
      },
    );
  };

  const fieldProps = (field: "name" | "shards" | "ttl_ms" | "retention_ms") => {
    const errs = fieldErrors[field];
    return {
      "aria-invalid": errs ? true : undefined,
      "aria-describedby": errs ? `create-ns-${field}-error` : `create-ns-${field}-hint`,
    } as const;
  };

  return (
    <section className="card create-card" aria-labelledby="create-ns-title">
      <h2 id="create-ns-title">Create namespace</h2>
      <form className="inline-form" onSubmit={onSubmit} noValidate>
        <div className="field">
          <label htmlFor="create-ns-name">Name</label>
          <input
            id="create-ns-name"
            name="name"
            value={name}
            onChange={(e) => {
              setName(e.target.value);
              if (create.isError) create.reset();
              setLocalErrors(({ name: _drop, ...rest }) => rest);
            }}
            autoComplete="off"
            spellCheck={false}
            placeholder="e.g. orders"
            data-testid="create-namespace-name"
            {...fieldProps("name")}
          />
          <FieldMessage id="create-ns-name" errors={fieldErrors.name} hint={NAME_HINT} />
        </div>
        <div className="field field-narrow">
          <label htmlFor="create-ns-shards">Shards</label>
          <input
            id="create-ns-shards"
            name="shards"
            type="number"
            inputMode="numeric"
            min={1}
            max={MAX_SHARDS}
            step={1}
            value={shards}
            onChange={(e) => {
              setShards(e.target.value);
              if (create.isError) create.reset();
              setLocalErrors(({ shards: _drop, ...rest }) => rest);
            }}
            data-testid="create-namespace-shards"
            {...fieldProps("shards")}
          />
          <FieldMessage id="create-ns-shards" errors={fieldErrors.shards} hint={`1 to ${MAX_SHARDS}.`} />
        </div>
        {nodeNames.length > 1 && (
          <div className="field field-medium">
            <label htmlFor="create-ns-node">Nodes</label>
            <select
              id="create-ns-node"
              value={placeOn}
              onChange={(e) => setPlaceOn(e.target.value)}
              data-testid="create-namespace-node"
              aria-describedby="create-ns-node-hint"
            >
              <option value="">default node</option>
              <option value={SPREAD}>spread over all {nodeNames.length} nodes</option>
              {nodeNames.map((n) => (
                <option key={n} value={n}>
                  all on {n}
                </option>
              ))}
            </select>
            <FieldMessage
              id="create-ns-node"
              errors={fieldErrors.placement ?? fieldErrors.node}
              hint="Where the shards live; fixed once created."
            />
          </div>
        )}
        {(["ttl_ms", "retention_ms"] as const).map((field) => (
          <div className="field field-medium" key={field}>
            <label htmlFor={`create-ns-${field}`}>{field === "ttl_ms" ? "TTL (optional)" : "Retention (optional)"}</label>
            <input
              id={`create-ns-${field}`}
              value={policyText[field]}
              onChange={(e) => {
                const value = e.target.value;
                setPolicyText((p) => ({ ...p, [field]: value }));
                if (create.isError) create.reset();
                setLocalErrors(({ [field]: _drop, ...rest }) => rest);
              }}
              autoComplete="off"
              placeholder="inherit"
              data-testid={`create-namespace-${field === "ttl_ms" ? "ttl" : "retention"}`}
              {...fieldProps(field)}
            />
            <FieldMessage id={`create-ns-${field}`} errors={fieldErrors[field]} hint="e.g. 7d, 12h, infinite; empty inherits." />
          </div>
        ))}
        <div className="field field-action">
          <button
            type="submit"
            className="button button-primary"
            disabled={create.isPending}
            data-testid="create-namespace-submit"
          >
            {create.isPending ? "Creating…" : "Create namespace"}
          </button>
        </div>
      </form>
      {formMessage && (
        <p className="form-error" role="alert" data-testid="create-namespace-error">
          {formMessage}
        </p>
      )}
      {created && !create.isError && (
        <p className="form-success" role="status" data-testid="create-namespace-success">
          Created namespace <strong>{created}</strong>.
        </p>
      )}
    </section>
  );
}
