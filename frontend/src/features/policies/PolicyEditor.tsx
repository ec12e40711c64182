// Policy editor for the cluster default, a namespace or a node. Every field
// shows its effective value and where it comes from; an admin overrides a
// field (or resets it to the inherited value), types values in human units,
// reviews a before → after diff, then saves. Server field errors appear next
// to their fields.

import { useId, useMemo, useState } from "react";
import { ApiError, errorMessage, GENERIC_FIELD_MESSAGE } from "../../api/client";
import { useMe, usePolicy, useUpdatePolicy } from "../../api/queries";
import type { PolicyChangeRequest, PolicyField, PolicyScope, PolicySource, PolicyView } from "../../api/types";
import { canAdminister } from "../auth/roles";
import {
  computePolicyDiff,
  formatPolicyValue,
  nullText,
  GROUP_LABELS,
  groupPolicyFields,
  initialDraft,
  SOURCE_LABELS,
  UNIT_HINTS,
  type FieldDraft,
  type PolicyChange,
} from "./policy";
import { Badge, ErrorState, LoadingState } from "../../components/States";

type ScopeKind = PolicyScope["kind"];

const SOURCE_TONE: Record<PolicySource, "ok" | "warn" | "neutral"> = {
  builtin: "neutral",
  cluster: "neutral",
  namespace: "ok",
  node: "ok",
};

const OVERRIDE_LABEL: Record<ScopeKind, string> = {
  cluster: "Set in cluster default",
  namespace: "Override for this namespace",
  node: "Override for this node",
};

/** Map server error keys ("set.ttl_ms", "ttl_ms") to policy field names. */
function serverFieldErrors(error: unknown, fields: Record<string, PolicyField>) {
  const inline: Record<string, string[]> = {};
  const other: string[] = [];
  if (!(error instanceof ApiError)) return { inline, other: error ? [errorMessage(error)] : [] };
  if (error.detail !== GENERIC_FIELD_MESSAGE) other.push(error.detail);
  for (const [key, msgs] of Object.entries(error.fieldErrors)) {
    const name = key.replace(/^(set|reset)\./, "").replace(/\.\d+$/, "");
    if (name in fields) (inline[name] ??= []).push(...msgs);
    else other.push(`${key}: ${msgs.join(" ")}`);
  }
  return { inline, other };
}

export interface PolicyEditorProps {
  view: PolicyView;
  scopeKind: ScopeKind;
  canEdit: boolean;
  /** Sends the change; resolves with the new view, rejects with an ApiError. */
  onSave: (change: PolicyChangeRequest) => Promise<unknown>;
}

export function PolicyEditor({ view, scopeKind, canEdit, onSave }: PolicyEditorProps) {
  const [drafts, setDrafts] = useState<Record<string, FieldDraft>>({});
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<unknown>(null);
  const [staleServerErrors, setStaleServerErrors] = useState<Set<string>>(new Set());
  const [saved, setSaved] = useState<number | null>(null);

  const diff = useMemo(() => computePolicyDiff(view.fields, drafts), [view.fields, drafts]);
  const server = useMemo(() => serverFieldErrors(saveError, view.fields), [saveError, view.fields]);
  const groups = useMemo(() => groupPolicyFields(view.fields), [view.fields]);

  const draftFor = (name: string, field: PolicyField) => drafts[name] ?? initialDraft(field);
  const update = (name: string, field: PolicyField, patch: Partial<FieldDraft>) => {
    setSaved(null);
    setStaleServerErrors((s) => new Set(s).add(name));
    setDrafts((d) => ({ ...d, [name]: { ...(d[name] ?? initialDraft(field)), ...patch } }));
  };

  const errorsFor = (name: string): string[] => {
    const out: string[] = [];
    if (diff.errors[name]) out.push(diff.errors[name]);
    if (!staleServerErrors.has(name) && server.inline[name]) out.push(...server.inline[name]);
    return out;
  };

  const save = async () => {
    setSaved(null); // a new save's outcome replaces the last one's, success or error
    if (diff.changes.length === 0 || Object.keys(diff.errors).length > 0) return;
    setSaving(true);
    setSaveError(null);
    setStaleServerErrors(new Set());
    try {
      await onSave(diff.request);
      setSaved(diff.changes.length);
      setDrafts({});
    } catch (err) {
      setSaveError(err);
    } finally {
      setSaving(false);
    }
  };

  const discard = () => {
    setDrafts({});
    setSaveError(null);
    setSaved(null);
  };

  const errorCount = Object.keys(diff.errors).length;

  return (
    <div className="policy-editor" data-testid="policy-editor">
      {view.sync_state && view.sync_state !== "synced" && (
        <div
          className={`banner ${view.sync_state === "failed" ? "banner-fail" : "banner-warn"}`}
          role="status"
          data-testid="policy-pending"
        >
          <strong>{view.sync_state === "failed" ? "Not applied:" : "Pending:"}</strong> the node has not taken
          the change yet{view.sync_state === "pending" ? "; it is retried automatically" : ""}.
          {view.sync_error && <div className="small">Node said: {view.sync_error}</div>}
        </div>
      )}
      {!canEdit && (
        <p className="muted small" data-testid="policy-readonly">
          Read-only: changing policies needs the admin role.
        </p>
      )}

      {groups.map(([group, fields]) => (
        <fieldset key={group} className="policy-group" data-testid={`policy-group-${group}`}>
          <legend>{GROUP_LABELS[group] ?? group}</legend>
          {fields.map(([name, field]) => (
            <PolicyFieldRow
              key={name}
              name={name}
              field={field}
              draft={draftFor(name, field)}
              edited={diff.changes.some((c) => c.field === name)}
              errors={errorsFor(name)}
              scopeKind={scopeKind}
              canEdit={canEdit && !saving}
              onChange={(patch) => update(name, field, patch)}
            />
          ))}
        </fieldset>
      ))}

      {server.other.length > 0 && (
        <p className="form-error" role="alert" data-testid="policy-error">
          {server.other.join(" ")}
        </p>
      )}
      {saved !== null && (
        <p className="form-success" role="status" data-testid="policy-saved">
          Saved {saved} change{saved === 1 ? "" : "s"}.
        </p>
      )}

      {canEdit && (diff.changes.length > 0 || errorCount > 0) && (
        <section className="policy-diff card" aria-labelledby="policy-diff-title" data-testid="policy-diff">
          <h3 id="policy-diff-title">Review changes</h3>
          {diff.changes.length > 0 ? (
            <DiffTable changes={diff.changes} fields={view.fields} scopeKind={scopeKind} />
          ) : (
            <p className="muted">No valid changes yet.</p>
          )}
          {errorCount > 0 && (
            <p className="error-text" role="alert">
              Fix {errorCount} field{errorCount === 1 ? "" : "s"} marked above before saving.
            </p>
          )}
          <div className="button-row">
            <button
              type="button"
              className="button button-primary"
              onClick={() => void save()}
              disabled={saving || errorCount > 0 || diff.changes.length === 0}
              data-testid="policy-save"
            >
              {saving ? "Saving…" : `Save ${diff.changes.length} change${diff.changes.length === 1 ? "" : "s"}`}
            </button>
            <button type="button" className="button" onClick={discard} disabled={saving} data-testid="policy-discard">
              Discard
            </button>
          </div>
        </section>
      )}
    </div>
  );
}

function DiffTable({
  changes,
  fields,
  scopeKind,
}: {
  changes: PolicyChange[];
  fields: Record<string, PolicyField>;
  scopeKind: ScopeKind;
}) {
  return (
    <table className="table table-compact">
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((c) => {
          const field = fields[c.field]!;
          return (
            <tr key={c.field} data-testid={`policy-diff-${c.field}`}>
              <th scope="row" className="mono">
                {c.field}
              </th>
              <td>
                {formatPolicyValue(field, c.before, c.field)} <span className="muted small">({SOURCE_LABELS[c.beforeSource]})</span>
              </td>
              <td>
                {c.kind === "set" ? (
                  <strong>{formatPolicyValue(field, c.after, c.field)}</strong>
                ) : scopeKind === "namespace" ? (
                  <span>inherited (cluster default or built-in)</span>
                ) : (
                  <span>
                    inherited: built-in <strong>{formatPolicyValue(field, field.default, c.field)}</strong>
                  </span>
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function PolicyFieldRow({
  name,
  field,
  draft,
  edited,
  errors,
  scopeKind,
  canEdit,
  onChange,
}: {
  name: string;
  field: PolicyField;
  draft: FieldDraft;
  edited: boolean;
  errors: string[];
  scopeKind: ScopeKind;
  canEdit: boolean;
  onChange: (patch: Partial<FieldDraft>) => void;
}) {
  const id = useId();
  const inputId = `${id}-input`;
  const editable = canEdit && draft.override;
  const hasError = errors.length > 0;
  const describedBy = hasError ? `${id}-error` : `${id}-help`;
  const inputDisabled = !editable || (field.nullable && draft.infinite);

  let control;
  if (field.unit === "bool") {
    control = (
      <select
        id={inputId}
        value={draft.text}
        disabled={!editable}
        onChange={(e) => onChange({ text: e.target.value })}
        aria-invalid={hasError || undefined}
        aria-describedby={describedBy}
        data-testid={`policy-field-${name}`}
      >
        <option value="true">on</option>
        <option value="false">off</option>
      </select>
    );
  } else if (field.unit === "choice") {
    const options = field.choices.includes(draft.text) || !draft.text ? field.choices : [draft.text, ...field.choices];
    control = (
      <select
        id={inputId}
        value={draft.text}
        disabled={inputDisabled}
        onChange={(e) => onChange({ text: e.target.value })}
        aria-invalid={hasError || undefined}
        aria-describedby={describedBy}
        data-testid={`policy-field-${name}`}
      >
        {!draft.text && <option value="">(not set)</option>}
        {options.map((c) => (
          <option key={c} value={c}>
            {c}
          </option>
        ))}
      </select>
    );
  } else {
    control = (
      <input
        id={inputId}
        value={inputDisabled && field.nullable && draft.infinite ? nullText(field.unit, name) : draft.text}
        disabled={inputDisabled}
        onChange={(e) => onChange({ text: e.target.value })}
        autoComplete="off"
        spellCheck={false}
        placeholder={UNIT_HINTS[field.unit]}
        aria-invalid={hasError || undefined}
        aria-describedby={describedBy}
        data-testid={`policy-field-${name}`}
      />
    );
  }

  return (
    <div className={`policy-row${edited ? " is-edited" : ""}`} data-testid={`policy-row-${name}`}>
      <div className="policy-name">
        <label htmlFor={inputId} className="mono">
          {name}
        </label>
        <p className="muted small" id={`${id}-help`}>
          {field.help}
          {field.unit !== "bool" && field.unit !== "choice" ? ` · ${UNIT_HINTS[field.unit]}` : ""}
        </p>
      </div>
      <div className="policy-effective">
        <span data-testid={`policy-field-${name}-value`}>{formatPolicyValue(field, field.value, name)}</span>{" "}
        <Badge tone={SOURCE_TONE[field.source]} testId={`policy-field-${name}-source`}>
          {SOURCE_LABELS[field.source]}
        </Badge>
        {edited && (
          <Badge tone="warn" testId={`policy-field-${name}-edited`}>
            edited
          </Badge>
        )}
      </div>
      <div className="policy-control">
        <div className="policy-inputs">
          {control}
          {field.nullable && (
            <label className="check">
              <input
                type="checkbox"
                checked={draft.infinite}
                disabled={!editable}
                onChange={(e) => onChange({ infinite: e.target.checked })}
                data-testid={`policy-field-${name}-infinite`}
              />
              {nullText(field.unit, name)}
            </label>
          )}
        </div>
        {canEdit && (
          <div className="policy-toggles">
            <label className="check">
              <input
                type="checkbox"
                checked={draft.override}
                onChange={(e) => onChange({ override: e.target.checked })}
                data-testid={`policy-field-${name}-override`}
              />
              {OVERRIDE_LABEL[scopeKind]}
            </label>
            {field.overridden && draft.override && (
              <button
                type="button"
                className="link-button small"
                onClick={() => onChange({ override: false })}
                data-testid={`policy-field-${name}-reset`}
              >
                Reset to inherited
              </button>
            )}
          </div>
        )}
        {hasError && (
          <p className="field-error" id={`${id}-error`} role="alert" data-testid={`policy-error-${name}`}>
            {errors.join(" ")}
          </p>
        )}
      </div>
    </div>
  );
}

/** The editor with its data: loads the policy of `scope` and saves through the API. */
export function PolicyPanel({ scope }: { scope: PolicyScope }) {
  const { data: user } = useMe();
  const policy = usePolicy(scope);
  const update = useUpdatePolicy(scope);

  if (policy.isPending) return <LoadingState label="Loading policy…" />;
  if (policy.isError && !policy.data) {
    return (
      <ErrorState
        title="Could not load the policy"
        error={policy.error}
        onRetry={() => void policy.refetch()}
        retrying={policy.isFetching}
      />
    );
  }
  return (
    <PolicyEditor
      view={policy.data}
      scopeKind={scope.kind}
      canEdit={canAdminister(user)}
      onSave={(change) => update.mutateAsync(change)}
    />
  );
}
