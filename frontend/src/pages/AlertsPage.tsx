import { useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { ApiError, errorMessage, isNotFound, withQuery } from "../api/client";
import {
  useAckAlert,
  useAlertChannels,
  useAlertRules,
  useCursorPage,
  useDeleteAlertChannel,
  useDeleteAlertRule,
  useMe,
  useSaveAlertChannel,
  useSaveAlertRule,
  useSetAlertRuleEnabled,
  useSilenceAlert,
  useTestAlertChannel,
  METRICS_REFRESH_MS,
} from "../api/queries";
import type {
  Alert,
  AlertChannel,
  AlertChannelInput,
  AlertRule,
  AlertRuleInput,
  AlertSeverity,
  AlertState,
  ChannelTestResult,
  Comparator,
  ScopeType,
} from "../api/types";
import { canAdminister, canOperate } from "../auth/roles";
import { CursorPager } from "../components/CursorPager";
import { formLevelMessage } from "../components/Form";
import { Badge, EmptyState, ErrorState, LoadingState, NotAvailableState } from "../components/States";
import { tabPanelId, Tabs } from "../components/Tabs";
import { formatDateTime, formatDuration, formatRelativeTime, toDate, tryParseDuration } from "../lib/format";
import { useNow, usePageTitle } from "../lib/hooks";
import { alertMetric, alertTimeline, formatThreshold, parseThreshold } from "../lib/alerts";

const STATES: AlertState[] = ["firing", "pending", "resolved"];
const SEVERITY_TONE: Record<AlertSeverity, "fail" | "warn" | "neutral"> = { critical: "fail", warning: "warn", info: "neutral" };
const SILENCE_CHOICES = [15, 60, 240, 1440, 10080];

export default function AlertsPage() {
  usePageTitle("Alerts");
  const [search, setSearch] = useSearchParams();
  const state = (STATES.find((s) => s === search.get("state")) ?? "firing") as AlertState;
  const { data: user } = useMe();
  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Alerts</h1>
          <p className="muted">Alerts from the lifecycle rules; acknowledge or silence them, and manage rules and channels.</p>
        </div>
      </div>
      <Tabs
        tabs={STATES.map((s) => ({ value: s, label: s[0]!.toUpperCase() + s.slice(1) }))}
        value={state}
        onChange={(s) => setSearch({ state: s }, { replace: true })}
        label="Alert state"
        idPrefix="alerts"
      />
      <div role="tabpanel" id={tabPanelId("alerts", state)} aria-labelledby={`alerts-tab-${state}`}>
        <AlertList key={state} state={state} mayAct={canOperate(user)} />
      </div>
      <RulesSection mayEdit={canAdminister(user)} mayToggle={canOperate(user)} />
      <ChannelsSection mayEdit={canAdminister(user)} mayTest={canOperate(user)} />
    </div>
  );
}

/** An alert's value or threshold: a percentage for ratio metrics, else at most 4 significant digits. */
function alertValue(value: number | null, metric: string | undefined): string {
  if (value === null || !Number.isFinite(value)) return "—";
  if (metric) return formatThreshold(metric, Number(value.toPrecision(4)));
  return String(Number(value.toPrecision(4)));
}

function AlertList({ state, mayAct }: { state: AlertState; mayAct: boolean }) {
  const firstUrl = withQuery("/api/alerts/", { state });
  const [url, setUrl] = useState(firstUrl);
  const page = useCursorPage<Alert>("alerts", url, { refetchInterval: state === "resolved" ? false : METRICS_REFRESH_MS });
  const rules = useAlertRules(); // for each alert's metric: ratios read as percentages
  // The alert's own copy of its rule's metric (newer servers), else the rule's.
  const metricOf = (a: Alert) => alertMetric(a, rules.data?.items);
  const ack = useAckAlert();
  const silence = useSilenceAlert();
  const [minutes, setMinutes] = useState<Record<number, number>>({});
  const now = useNow(15_000);

  if (page.isPending) return <LoadingState label="Loading alerts…" />;
  if (page.isError && !page.data) {
    if (isNotFound(page.error)) return <NotAvailableState feature="Alerting" testId="alerts-unavailable" />;
    return <ErrorState title="Could not load alerts" error={page.error} onRetry={() => void page.refetch()} />;
  }
  const rows = page.data.results;
  const actionError = ack.error ?? silence.error;
  return (
    <>
      {actionError && (
        <p className="form-error" role="alert" data-testid="alert-action-error">
          {errorMessage(actionError)}
        </p>
      )}
      {rows.length === 0 ? (
        <EmptyState title={`No ${state} alerts`}>
          {state === "firing" ? "All clear." : state === "pending" ? "No rule is close to firing." : "No alert has resolved yet."}
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="alerts-table">
            <thead>
              <tr>
                <th scope="col">Alert</th>
                <th scope="col">Value</th>
                <th scope="col">{state === "resolved" ? "Fired → resolved" : state === "pending" ? "Pending since" : "Since"}</th>
                <th scope="col">Handling</th>
                {mayAct && state !== "resolved" && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => {
                // The server's word (older servers: silenced_until still ahead).
                const silenced = a.silenced ?? (toDate(a.silenced_until) !== null && toDate(a.silenced_until)!.getTime() > now);
                return (
                  <tr key={a.id} data-testid={`alert-row-${a.id}`} className={`severity-${a.severity}`}>
                    <th scope="row">
                      <Badge tone={SEVERITY_TONE[a.severity] ?? "neutral"}>{a.severity}</Badge> {a.rule_name}
                      {a.rule === null && (
                        <span className="muted small" data-testid={`alert-rule-deleted-${a.id}`}>
                          {" "}
                          (rule deleted)
                        </span>
                      )}
                      <div className="muted small mono">{a.scope}</div>
                      <div className="small">{a.summary}</div>
                    </th>
                    <td className="small">
                      {alertValue(a.value, metricOf(a))} <span className="muted">vs {alertValue(a.threshold, metricOf(a))}</span>
                    </td>
                    <td className="small" data-testid={`alert-when-${a.id}`}>
                      {state === "resolved" ? (
                        alertTimeline(a) === "fired" ? (
                          <>
                            {formatDateTime(a.fired_at)} → {formatDateTime(a.resolved_at)}
                          </>
                        ) : (
                          // Stored by older servers: pending alerts that cleared were kept as "resolved".
                          <>
                            <span className="muted">never fired:</span> pending {formatDateTime(a.started_at)}, cleared {formatDateTime(a.resolved_at)}
                          </>
                        )
                      ) : (
                        <>
                          {formatDateTime(a.fired_at ?? a.started_at)}
                          <div className="muted">{formatRelativeTime(a.fired_at ?? a.started_at, now)}</div>
                        </>
                      )}
                    </td>
                    <td className="small" data-testid={`alert-handling-${a.id}`}>
                      {a.acknowledged_by ? (
                        <div>
                          acknowledged by {a.acknowledged_by} {formatRelativeTime(a.acknowledged_at, now)}
                        </div>
                      ) : (
                        <div className="muted">not acknowledged</div>
                      )}
                      {silenced && <div>silenced until {formatDateTime(a.silenced_until, { seconds: false })}</div>}
                    </td>
                    {mayAct && state !== "resolved" && (
                      <td>
                        <div className="action-bar">
                          {!a.acknowledged_by && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => ack.mutate(a.id)}
                              disabled={ack.isPending}
                              data-testid={`alert-ack-${a.id}`}
                            >
                              Acknowledge
                            </button>
                          )}
                          <label className="visually-hidden" htmlFor={`silence-${a.id}`}>
                            Silence for
                          </label>
                          <select
                            id={`silence-${a.id}`}
                            value={minutes[a.id] ?? 60}
                            onChange={(e) => setMinutes((m) => ({ ...m, [a.id]: Number(e.target.value) }))}
                            data-testid={`alert-silence-minutes-${a.id}`}
                          >
                            {SILENCE_CHOICES.map((m) => (
                              <option key={m} value={m}>
                                {formatDuration(m * 60_000)}
                              </option>
                            ))}
                          </select>
                          <button
                            type="button"
                            className="button button-small"
                            onClick={() => silence.mutate({ id: a.id, minutes: minutes[a.id] ?? 60 })}
                            disabled={silence.isPending}
                            data-testid={`alert-silence-${a.id}`}
                          >
                            Silence
                          </button>
                          {silenced && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => silence.mutate({ id: a.id, minutes: 0 })}
                              disabled={silence.isPending}
                              data-testid={`alert-unsilence-${a.id}`}
                            >
                              Lift silence
                            </button>
                          )}
                        </div>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <CursorPager page={page.data} onPage={setUrl} onFirst={() => setUrl(firstUrl)} atFirst={url === firstUrl} isFetching={page.isFetching} label="Alert pages" />
    </>
  );
}

// ---- Rules -------------------------------------------------------------------

// Metrics a rule may watch (backend/apps/metrics/catalog.py SERIES + "forecast"); the server validates.
const METRIC_SUGGESTIONS = [
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

const EMPTY_RULE: AlertRuleInput = {
  name: "",
  metric: "expired_ratio",
  scope_type: "all",
  scope: "",
  comparator: ">",
  threshold: 0.2,
  for_s: 300,
  severity: "warning",
  channels: [],
  enabled: true,
};

function RulesSection({ mayEdit, mayToggle }: { mayEdit: boolean; mayToggle: boolean }) {
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
  const [form, setForm] = useState({
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
      metric: form.metric.trim(),
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

const EMPTY_CHANNEL: AlertChannelInput = { name: "", kind: "email", target: "", enabled: true };

function ChannelsSection({ mayEdit, mayTest }: { mayEdit: boolean; mayTest: boolean }) {
  const channels = useAlertChannels();
  const save = useSaveAlertChannel();
  const del = useDeleteAlertChannel();
  const test = useTestAlertChannel();
  // Each channel's last test: its result, or the request's own failure (e.g. no permission).
  const [tests, setTests] = useState<Record<number, ChannelTestResult | { failed: string } | "sending">>({});
  const sendTest = (id: number) => {
    setTests((t) => ({ ...t, [id]: "sending" }));
    test.mutate(id, {
      onSuccess: (result) => setTests((t) => ({ ...t, [id]: result })),
      onError: (error) => setTests((t) => ({ ...t, [id]: { failed: errorMessage(error) } })),
    });
  };
  const [form, setForm] = useState<AlertChannelInput & { id?: number }>(EMPTY_CHANNEL);
  const [local, setLocal] = useState<Record<string, string>>({});
  const server = save.error instanceof ApiError ? save.error.fieldErrors : {};
  const err = (f: string) => local[f] ?? server[f]?.join(" ");

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const errs: Record<string, string> = {};
    if (!form.name.trim()) errs.name = "Enter a name.";
    if (form.kind === "email" && !/^\S+@\S+$/.test(form.target.trim())) errs.target = "Enter an email address.";
    if (form.kind === "webhook" && !/^https?:\/\/\S+$/.test(form.target.trim())) errs.target = "Enter an http(s) URL.";
    setLocal(errs);
    if (Object.keys(errs).length) return;
    const { id, ...body } = form;
    save.mutate({ body: { ...body, name: body.name.trim(), target: body.target.trim() }, id }, { onSuccess: () => setForm(EMPTY_CHANNEL) });
  };

  return (
    <section className="section" aria-labelledby="channels-title" data-testid="channels-section">
      <h2 id="channels-title" className="section-title">
        Notification channels
      </h2>
      {channels.isPending && <LoadingState label="Loading channels…" />}
      {channels.isError &&
        (isNotFound(channels.error) ? (
          <NotAvailableState feature="Notification channels" testId="channels-unavailable" />
        ) : channels.error instanceof ApiError && channels.error.status === 403 ? (
          // Older servers showed channels to admins only: not an error for everyone else.
          <p className="muted small" data-testid="channels-admin-only">
            Notification channels are shown to admins only on this server.
          </p>
        ) : (
          <ErrorState title="Could not load channels" error={channels.error} onRetry={() => void channels.refetch()} />
        ))}
      {channels.data && channels.data.items.length === 0 && <EmptyState title="No channels">{mayEdit ? "Add an email or webhook below." : "Ask an admin to add one."}</EmptyState>}
      {channels.data && channels.data.items.length > 0 && (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="channels-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Target</th>
                <th scope="col">Enabled</th>
                {(mayEdit || mayTest) && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {channels.data.items.map((c) => {
                const last = tests[c.id];
                return (
                  <tr key={c.id} data-testid={`channel-row-${c.id}`}>
                    <th scope="row">{c.name}</th>
                    <td>{c.kind}</td>
                    <td className="mono small" data-testid={`channel-target-${c.id}`}>
                      {c.target}
                      {c.target_redacted && (
                        <div className="muted" style={{ fontFamily: "inherit" }}>
                          shortened: only admins see the whole {c.kind === "email" ? "addresses" : "URL"}
                        </div>
                      )}
                    </td>
                    <td>{c.enabled ? "yes" : <span className="muted">no</span>}</td>
                    {(mayEdit || mayTest) && (
                      <td>
                        <div className="action-bar">
                          {mayTest && (
                            <button
                              type="button"
                              className="button button-small"
                              onClick={() => sendTest(c.id)}
                              disabled={last === "sending"}
                              aria-label={`Send a test notification to ${c.name}`}
                              title="Send a test message through this channel now (also when it is disabled)."
                              data-testid={`channel-test-${c.id}`}
                            >
                              {last === "sending" ? "Sending…" : "Send test"}
                            </button>
                          )}
                          {mayEdit && (
                            <>
                              <button
                                type="button"
                                className="button button-small"
                                onClick={() => setForm({ id: c.id, name: c.name, kind: c.kind, target: c.target_redacted ? "" : c.target, enabled: c.enabled })}
                                data-testid={`channel-edit-${c.id}`}
                              >
                                Edit
                              </button>
                              <button type="button" className="button button-small button-danger-outline" onClick={() => del.mutate(c.id)} data-testid={`channel-delete-${c.id}`}>
                                Delete
                              </button>
                            </>
                          )}
                        </div>
                        {last !== undefined && last !== "sending" && <ChannelTestOutcome id={c.id} result={last} />}
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {mayEdit && channels.data && (
        <form className="card section" onSubmit={onSubmit} noValidate aria-label="Channel" data-testid="channel-form">
          <h3 style={{ marginTop: 0 }}>{form.id ? `Edit channel “${form.name}”` : "Add channel"}</h3>
          <div className="inline-form">
            <div className="field field-medium">
              <label htmlFor="channel-name">Name</label>
              <input id="channel-name" value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} data-testid="channel-name" />
              {err("name") && <p className="field-error" role="alert">{err("name")}</p>}
            </div>
            <div className="field field-narrow">
              <label htmlFor="channel-kind">Kind</label>
              <select id="channel-kind" value={form.kind} onChange={(e) => setForm((f) => ({ ...f, kind: e.target.value as "email" | "webhook" }))} data-testid="channel-kind">
                <option value="email">email</option>
                <option value="webhook">webhook</option>
              </select>
            </div>
            <div className="field">
              <label htmlFor="channel-target">{form.kind === "email" ? "Email address" : "Webhook URL"}</label>
              <input id="channel-target" value={form.target} onChange={(e) => setForm((f) => ({ ...f, target: e.target.value }))} data-testid="channel-target" />
              {err("target") && <p className="field-error" role="alert" data-testid="channel-error-target">{err("target")}</p>}
            </div>
            <label className="check field-action">
              <input type="checkbox" checked={form.enabled} onChange={(e) => setForm((f) => ({ ...f, enabled: e.target.checked }))} data-testid="channel-enabled" />
              Enabled
            </label>
            <div className="field field-action">
              <button type="submit" className="button button-primary" disabled={save.isPending} data-testid="channel-save">
                {form.id ? "Save channel" : "Add channel"}
              </button>
            </div>
          </div>
          {formLevelMessage(save.error, new Set(["name", "kind", "target", "enabled"])) && (
            <p className="form-error" role="alert">
              {formLevelMessage(save.error, new Set(["name", "kind", "target", "enabled"]))}
            </p>
          )}
          {del.isError && <p className="form-error" role="alert">{errorMessage(del.error)}</p>}
        </form>
      )}
    </section>
  );
}

/** What a channel's test came to: delivered, not delivered (the server's words), or the request failed. */
function ChannelTestOutcome({ id, result }: { id: number; result: ChannelTestResult | { failed: string } }) {
  if ("failed" in result) {
    return (
      <p className="form-error small" role="alert" data-testid={`channel-test-result-${id}`}>
        Could not send the test: {result.failed}
      </p>
    );
  }
  return result.delivered ? (
    <p className="small" role="status" data-testid={`channel-test-result-${id}`}>
      <Badge tone="ok">delivered</Badge> Test message sent.
    </p>
  ) : (
    <p className="small" role="status" data-testid={`channel-test-result-${id}`}>
      <Badge tone="fail">not delivered</Badge> {result.error || "The channel did not take the test message."}
    </p>
  );
}
