import { useState, type FormEvent } from "react";
import { ApiError, errorMessage, GENERIC_FIELD_MESSAGE } from "../api/client";
import { useCreateNamespace, useMe, useNamespaces } from "../api/queries";
import type { FieldErrors, Namespace, SyncState } from "../api/types";
import { canAdminister } from "../auth/roles";
import { Badge, EmptyState, ErrorState, LoadingState } from "../components/States";
import { formatDateTime, formatRelativeTime } from "../lib/format";
import { useNow, usePageTitle } from "../lib/hooks";

// Mirrors storage_engine/validation.py; the server remains the authority.
const NAME_RE = /^[A-Za-z0-9._-]{1,200}$/;
const MAX_SHARDS = 1024;

export function NamespacesPage() {
  usePageTitle("Namespaces");
  const { data: user } = useMe();
  const namespaces = useNamespaces();
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

const SYNC_TONE: Record<SyncState, "ok" | "warn" | "fail"> = {
  synced: "ok",
  pending: "warn",
  failed: "fail",
};

function NamespaceTable({ items, now }: { items: Namespace[]; now: number }) {
  const sorted = [...items].sort((a, b) => a.name.localeCompare(b.name));
  return (
    <div className="table-wrap">
      <table className="table">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col" className="num">
              Shards
            </th>
            <th scope="col">Node</th>
            <th scope="col">Sync</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {sorted.map((ns) => (
            <tr key={ns.name} data-testid={`namespace-row-${ns.name}`}>
              <th scope="row" className="mono">
                {ns.name}
              </th>
              <td className="num">{ns.shards}</td>
              <td>{ns.node ?? <span className="muted">unassigned</span>}</td>
              <td>
                <Badge tone={SYNC_TONE[ns.sync_state] ?? "neutral"}>{ns.sync_state}</Badge>
                {ns.sync_error && <div className="error-text small">{ns.sync_error}</div>}
              </td>
              <td>
                <time dateTime={ns.created_at}>{formatDateTime(ns.created_at, { seconds: false })}</time>
                <div className="muted small">{formatRelativeTime(ns.created_at, now)}</div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function validate(name: string, shards: string): FieldErrors {
  const errors: FieldErrors = {};
  if (!name) errors.name = ["Enter a name."];
  else if (!NAME_RE.test(name)) errors.name = ["Use 1-200 letters, digits, '.', '_' or '-'."];
  else if (name === "." || name === "..") errors.name = ["The name cannot be '.' or '..'."];
  const n = Number(shards);
  if (!shards.trim()) errors.shards = ["Enter a shard count."];
  else if (!Number.isInteger(n) || n < 1 || n > MAX_SHARDS) errors.shards = [`Use a whole number from 1 to ${MAX_SHARDS}.`];
  return errors;
}

function CreateNamespaceForm() {
  const create = useCreateNamespace();
  const [name, setName] = useState("");
  const [shards, setShards] = useState("1");
  const [localErrors, setLocalErrors] = useState<FieldErrors>({});
  const [created, setCreated] = useState<string | null>(null);

  const serverError = create.error instanceof ApiError ? create.error : null;
  const fieldErrors: FieldErrors = { ...(serverError?.fieldErrors ?? {}), ...localErrors };
  const known = new Set(["name", "shards"]);
  const formMessage = formLevelMessage(create.error, known);

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const trimmed = name.trim();
    const errors = validate(trimmed, shards);
    setLocalErrors(errors);
    setCreated(null);
    if (Object.keys(errors).length > 0) {
      create.reset();
      return;
    }
    create.mutate(
      { name: trimmed, shards: Number(shards) },
      {
        onSuccess: (ns) => {
          setCreated(ns.name);
          setName("");
          setShards("1");
        },
      },
    );
  };

  const fieldProps = (field: "name" | "shards") => {
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
          <FieldMessage id="create-ns-name" errors={fieldErrors.name} hint="Letters, digits, '.', '_' or '-'." />
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

/** Errors not shown next to a field: detail, non-field and unknown-field messages. */
function formLevelMessage(error: unknown, inlineFields: Set<string>): string | null {
  if (!error) return null;
  if (!(error instanceof ApiError)) return errorMessage(error);
  const messages: string[] = [];
  if (error.detail !== GENERIC_FIELD_MESSAGE) messages.push(error.detail);
  for (const [field, msgs] of Object.entries(error.fieldErrors)) {
    if (!inlineFields.has(field)) messages.push(`${field}: ${msgs.join(" ")}`);
  }
  return messages.length > 0 ? messages.join(" ") : null;
}

function FieldMessage({ id, errors, hint }: { id: string; errors?: string[]; hint: string }) {
  if (errors && errors.length > 0) {
    return (
      <p className="field-error" id={`${id}-error`} role="alert">
        {errors.join(" ")}
      </p>
    );
  }
  return (
    <p className="field-hint" id={`${id}-hint`}>
      {hint}
    </p>
  );
}
