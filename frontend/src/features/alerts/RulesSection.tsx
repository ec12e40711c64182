// Alert rules: the table, turning built-in rules off and on, the rule form.
import { useState, type FormEvent } from "react";
import { ApiError, errorMessage, isNotFound } from "../../api/client";
import {
  useAlertChannels,
  useAlertRules,
  useDeleteAlertRule,
  useSaveAlertRule,
  useSetAlertRuleEnabled,
} from "../../api/queries";
import type {
  AlertChannel,
  AlertMetric,
  AlertRule,
  AlertRuleInput,
  AlertSeverity,
  Comparator,
  ScopeType,
} from "../../api/types";
import { formLevelMessage } from "../../components/Form";
import { Badge, EmptyState, ErrorState, LoadingState, NotAvailableState } from "../../components/States";
import { formatDuration, tryParseDuration } from "../../lib/format";
import { formatThreshold, parseThreshold } from "./alerts";
import { SEVERITY_TONE } from "./AlertList";

const METRIC_SUGGESTIONS: AlertMetric[] = [
  "expired_ratio",
  "expired_bytes_ratio",
  "expired_records",
  "expired_bytes",
  "stored_bytes",
  "backlog_messages",
  "backlog_live_messages",
  "backlog_bytes",
  "subscription_backlog_bytes_max",
  "backlog_age_seconds",
  "scan_duration_seconds",
  "disk_used_ratio",
  "forecast",
  "delete_queue_length",
  "delete_queue_drops_total",
  "delete_rate",
  "up",
  "append_latency_seconds",
  "read_latency_seconds",
  "celery_queue_depth",
];

const EMPTY_RULE = {
  name: "",
  metric: "expired_ratio",
  scope_type: "all",
  scope: "",
  comparator: ">",
  threshold: 0.2,
  threshold_policy: "",
  for_s: 300,
  severity: "warning",
  channels: [] as number[],
  enabled: true,
} satisfies AlertRuleInput;

/** What the rule form edits: the rule's fields, the metric as typed (free text with suggestions: the server
 * checks it and names the field when it is not a metric), threshold and duration as text. */
interface RuleFields {
  name: string;
  metric: string;
  scope_type: ScopeType;
  scope: string;
  comparator: Comparator;
  severity: AlertSeverity;
  channels: number[];
  enabled: boolean;
  thresholdText: string;
  forText: string;
}

export function RulesSection({ mayEdit, mayToggle }: { mayEdit: boolean; mayToggle: boolean }) {
  const rules = useAlertRules();
  const channels = useAlertChannels();
  const del = useDeleteAlertRule();
  const toggle = useSetAlertRuleEnabled();
  const [editing, setEditing] = useState<AlertRule | "new" | null>(null);
  const [deleting, setDeleting] = useState<number | null>(null);
  const channelName = (id: number) => channels.data?.items.find((c) => c.id === id)?.name ?? `#${id}`;

  return (
    <section className="section" aria-labelledby="rules-title" data-testid="rules-section">
      <div className="toolbar">
        <h2 id="rules-title" className="section-title" style={{ margin: 0 }}>
          Rules
        </h2>
        {mayEdit && rules.data && (
          <button type="button" className="button" onClick={() => setEditing("new")} data-testid="rule-new">
            New rule
          </button>
        )}
        {!mayEdit && (
          <span className="muted small" data-testid="rules-role-note">
            {mayToggle ? "Operators turn rules off and on; editing rules needs the admin role." : "Read-only: changing rules needs the operator or admin role."}
          </span>
        )}
      </div>
      {rules.isPending && <LoadingState label="Loading rules…" />}
      {rules.isError &&
        (isNotFound(rules.error) ? (
          <NotAvailableState feature="Alert rules" testId="rules-unavailable" />
        ) : (
          <ErrorState title="Could not load rules" error={rules.error} onRetry={() => void rules.refetch()} />
        ))}
      {editing && (
        <RuleForm
          key={editing === "new" ? "new" : editing.id}
          rule={editing === "new" ? undefined : editing}
          channels={channels.data?.items ?? []}
          onDone={() => setEditing(null)}
        />
      )}
      {del.isError && (
        <p className="form-error" role="alert">
          {errorMessage(del.error)}
        </p>
      )}
      {toggle.isError && (
        <p className="form-error" role="alert" data-testid="rule-toggle-error">
          {errorMessage(toggle.error)}
        </p>
      )}
      {rules.data && rules.data.items.length === 0 && <EmptyState title="No alert rules">{mayEdit ? "Add one with “New rule”." : "Ask an admin to add rules."}</EmptyState>}
      {rules.data && rules.data.items.length > 0 && (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="rules-table">
            <thead>
              <tr>
                <th scope="col">Rule</th>
                <th scope="col">Condition</th>
                <th scope="col">Scope</th>
                <th scope="col">Severity</th>
                <th scope="col">Channels</th>
                <th scope="col">Enabled</th>
                {(mayEdit || mayToggle) && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {rules.data.items.map((r) => (
                <tr key={r.id} data-testid={`rule-row-${r.id}`} className={r.enabled ? undefined : "muted"}>
                  <th scope="row">
                    {r.name}
                    {r.builtin && (
                      <>
                        {" "}
                        <Badge tone="neutral">default</Badge>
                      </>
                    )}
                    {r.description && <div className="muted small">{r.description}</div>}
                  </th>
                  <td className="mono small">
                    {r.metric} {r.comparator} {r.threshold_policy ? `${r.threshold} × ${r.threshold_policy}` : formatThreshold(r.metric, r.threshold)}
                    {r.for_s > 0 ? ` for ${formatDuration(r.for_s * 1000)}` : ""}
                  </td>
                  <td className="small">
                    {r.scope_type}
                    {r.scope ? `: ${r.scope}` : ""}
                  </td>
                  <td>
                    <Badge tone={SEVERITY_TONE[r.severity] ?? "neutral"}>{r.severity}</Badge>
                  </td>
                  <td className="small">{r.channels.length ? r.channels.map(channelName).join(", ") : <span className="muted">none</span>}</td>
                  <td data-testid={`rule-enabled-${r.id}`}>
                    {r.enabled ? (
                      "yes"
                    ) : (
                      <span title="Not evaluated; its open alerts were closed when it was turned off.">
                        <Badge tone="neutral">disabled</Badge>
                      </span>
                    )}
                  </td>
                  {(mayEdit || mayToggle) && (
                    <td>
                      {mayEdit && deleting === r.id ? (
                        <span className="action-bar">
                          <button type="button" className="button button-small button-danger" onClick={() => del.mutate(r.id, { onSuccess: () => setDeleting(null) })} data-testid={`rule-delete-confirm-${r.id}`}>
                            Delete
                          </button>
                          <button type="button" className="button button-small" onClick={() => setDeleting(null)}>
                            Keep
                          </button>
                          <span className="muted small">{r.builtin ? "A deleted built-in rule is not re-created; its alert history stays." : "Its alert history stays."}</span>
                        </span>
                      ) : (
                        <span className="action-bar">
                          {mayToggle && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => toggle.mutate({ id: r.id, enabled: !r.enabled })}
                              disabled={toggle.isPending}
                              aria-label={`${r.enabled ? "Disable" : "Enable"} rule ${r.name}`}
                              title={r.enabled ? "Stop evaluating this rule; its open alerts close (firing ones resolve)." : "Evaluate this rule again."}
                              data-testid={`rule-toggle-${r.id}`}
                            >
                              {r.enabled ? "Disable" : "Enable"}
                            </button>
                          )}
                          {mayEdit && (
                            <>
                              <button type="button" className="button button-small" onClick={() => setEditing(r)} data-testid={`rule-edit-${r.id}`}>
                                Edit
                              </button>
                              <button type="button" className="button button-small button-danger-outline" onClick={() => setDeleting(r.id)} data-testid={`rule-delete-${r.id}`}>
                                Delete…
                              </button>
                            </>
                          )}
                        </span>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function RuleForm({ rule, channels, onDone }: { rule?: AlertRule; channels: AlertChannel[]; onDone: () => void }) {
  const save = useSaveAlertRule();
  const initial = rule ?? EMPTY_RULE;
  const [form, setForm] = useState<RuleFields>({
    ...initial,
    thresholdText: initial.threshold_policy ? String(initial.threshold) : formatThreshold(initial.metric, initial.threshold),
    forText: formatDuration(initial.for_s * 1000, { maxParts: 3 }),
  });
  const [local, setLocal] = useState<Record<string, string>>({});
  const server = save.error instanceof ApiError ? save.error.fieldErrors : {};
  const err = (f: string) => local[f] ?? server[f]?.join(" ");
  const known = new Set(["name", "metric", "scope_type", "scope", "comparator", "threshold", "for_s", "severity", "channels", "enabled"]);

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const errs: Record<string, string> = {};
    if (!form.name.trim()) errs.name = "Enter a name.";
    if (!form.metric.trim()) errs.metric = "Enter a metric.";
    if (form.scope_type !== "all" && !form.scope.trim()) errs.scope = `Enter the ${form.scope_type} this rule watches.`;
    const threshold = parseThreshold(form.thresholdText);
    if (!threshold.ok) errs.threshold = threshold.error;
    const forMs = form.forText.trim() ? tryParseDuration(form.forText) : ({ ok: true, value: 0 } as const);
    if (!forMs.ok) errs.for_s = forMs.error;
    else if (forMs.value === null) errs.for_s = "Use a finite duration, e.g. 5m.";
    setLocal(errs);
    if (Object.keys(errs).length || !threshold.ok || !forMs.ok || forMs.value === null) return;
    const body: AlertRuleInput = {
      name: form.name.trim(),
      metric: form.metric.trim() as AlertMetric, // as typed: a field error when it is no metric
      scope_type: form.scope_type,
      scope: form.scope_type === "all" ? "" : form.scope.trim(),
      comparator: form.comparator,
      threshold: threshold.value,
      for_s: Math.round(forMs.value / 1000),
      severity: form.severity,
      channels: form.channels,
      enabled: form.enabled,
    };
    if (rule?.threshold_policy !== undefined) body.threshold_policy = rule.threshold_policy;
    if (rule?.description !== undefined) body.description = rule.description;
    save.mutate({ body, id: rule?.id }, { onSuccess: onDone });
  };
  const fieldError = (f: string) =>
    err(f) ? (
      <p className="field-error" role="alert" data-testid={`rule-error-${f}`}>
        {err(f)}
      </p>
    ) : null;

  return (
    <form className="card section" onSubmit={onSubmit} noValidate aria-label={rule ? `Edit rule ${rule.name}` : "New rule"} data-testid="rule-form">
      <h3 style={{ marginTop: 0 }}>{rule ? `Edit rule “${rule.name}”` : "New rule"}</h3>
      <div className="inline-form">
        <div className="field">
          <label htmlFor="rule-name">Name</label>
          <input id="rule-name" value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} data-testid="rule-name" />
          {fieldError("name")}
        </div>
        <div className="field">
          <label htmlFor="rule-metric">Metric</label>
          <input id="rule-metric" list="rule-metrics" value={form.metric} onChange={(e) => setForm((f) => ({ ...f, metric: e.target.value }))} data-testid="rule-metric" />
          <datalist id="rule-metrics">
            {METRIC_SUGGESTIONS.map((m) => (
              <option key={m} value={m} />
            ))}
          </datalist>
          {fieldError("metric")}
        </div>
        <div className="field field-narrow">
          <label htmlFor="rule-comparator">When</label>
          <select id="rule-comparator" value={form.comparator} onChange={(e) => setForm((f) => ({ ...f, comparator: e.target.value as Comparator }))} data-testid="rule-comparator">
            {[">", ">=", "<", "<="].map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </div>
        <div className="field field-medium">
          <label htmlFor="rule-threshold">Threshold</label>
          {rule?.threshold_policy && <span className="field-hint">× {rule.threshold_policy} (policy value)</span>}
          <input id="rule-threshold" value={form.thresholdText} onChange={(e) => setForm((f) => ({ ...f, thresholdText: e.target.value }))} placeholder="e.g. 20% or 1000" data-testid="rule-threshold" />
          {fieldError("threshold")}
        </div>
        <div className="field field-medium">
          <label htmlFor="rule-for">For at least</label>
          <input id="rule-for" value={form.forText} onChange={(e) => setForm((f) => ({ ...f, forText: e.target.value }))} placeholder="e.g. 5m" data-testid="rule-for" />
          {fieldError("for_s")}
        </div>
      </div>
      <div className="inline-form">
        <div className="field field-medium">
          <label htmlFor="rule-scope-type">Scope</label>
          <select id="rule-scope-type" value={form.scope_type} onChange={(e) => setForm((f) => ({ ...f, scope_type: e.target.value as ScopeType }))} data-testid="rule-scope-type">
            {["all", "namespace", "shard", "node"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        {form.scope_type !== "all" && (
          <div className="field">
            <label htmlFor="rule-scope">{form.scope_type === "shard" ? "Shard (namespace/shard)" : form.scope_type}</label>
            <input id="rule-scope" value={form.scope} onChange={(e) => setForm((f) => ({ ...f, scope: e.target.value }))} data-testid="rule-scope" />
            {fieldError("scope")}
          </div>
        )}
        <div className="field field-medium">
          <label htmlFor="rule-severity">Severity</label>
          <select id="rule-severity" value={form.severity} onChange={(e) => setForm((f) => ({ ...f, severity: e.target.value as AlertSeverity }))} data-testid="rule-severity">
            {["info", "warning", "critical"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <fieldset className="field" style={{ border: "none", padding: 0 }}>
          <legend className="small" style={{ fontWeight: 600 }}>
            Notify
          </legend>
          {channels.length === 0 && <span className="muted small">No channels yet.</span>}
          {channels.map((c) => (
            <label key={c.id} className="check">
              <input
                type="checkbox"
                checked={form.channels.includes(c.id)}
                onChange={(e) =>
                  setForm((f) => ({ ...f, channels: e.target.checked ? [...f.channels, c.id] : f.channels.filter((x) => x !== c.id) }))
                }
                data-testid={`rule-channel-${c.id}`}
              />
              {c.name}
            </label>
          ))}
        </fieldset>
        <label className="check">
          <input type="checkbox" checked={form.enabled} onChange={(e) => setForm((f) => ({ ...f, enabled: e.target.checked }))} data-testid="rule-enabled" />
          Enabled
        </label>
      </div>
      {formLevelMessage(save.error, known) && (
        <p className="form-error" role="alert" data-testid="rule-form-error">
          {formLevelMessage(save.error, known)}
        </p>
      )}
      <div className="button-row">
        <button type="submit" className="button button-primary" disabled={save.isPending} data-testid="rule-save">
          {save.isPending ? "Saving…" : "Save rule"}
        </button>
        <button type="button" className="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}

// ---- Channels ------------------------------------------------------------------
