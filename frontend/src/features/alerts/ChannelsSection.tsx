// Notification channels: the table, the form, sending a test.
import { useState, type FormEvent } from "react";
import { ApiError, errorMessage, isNotFound } from "../../api/client";
import {
  useAlertChannels,
  useDeleteAlertChannel,
  useSaveAlertChannel,
  useTestAlertChannel,
} from "../../api/queries";
import type {
  AlertChannel,
  AlertChannelInput,
  ChannelTestResult,
} from "../../api/types";
import { formLevelMessage } from "../../components/Form";
import { Badge, EmptyState, ErrorState, LoadingState, NotAvailableState } from "../../components/States";

const EMPTY_CHANNEL: AlertChannelInput = { name: "", kind: "email", target: "", enabled: true, secret: "" };
// What the secret of each kind is (email has none): a webhook's signs every delivery (required), an
// Alertmanager's is sent as a bearer token (optional). Never shown again once saved.
const SECRET_LABEL: Record<AlertChannel["kind"], string | null> = {
  email: null,
  webhook: "Signing secret",
  alertmanager: "Bearer token (optional)",
};
// What the target of each kind is.
const TARGET_LABEL: Record<AlertChannel["kind"], string> = {
  email: "Email address",
  webhook: "Webhook URL",
  alertmanager: "Alertmanager URL",
};

export function ChannelsSection({ mayEdit, mayTest }: { mayEdit: boolean; mayTest: boolean }) {
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
  const [form, setForm] = useState<AlertChannelInput & { id?: number; hasSecret?: boolean }>(EMPTY_CHANNEL);
  const [local, setLocal] = useState<Record<string, string>>({});
  const server = save.error instanceof ApiError ? save.error.fieldErrors : {};
  const err = (f: string) => local[f] ?? server[f]?.join(" ");

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const errs: Record<string, string> = {};
    if (!form.name.trim()) errs.name = "Enter a name.";
    if (form.kind === "email" && !/^\S+@\S+$/.test(form.target.trim())) errs.target = "Enter an email address.";
    if (form.kind !== "email" && !/^https?:\/\/\S+$/.test(form.target.trim())) errs.target = "Enter an http(s) URL.";
    const secret = form.kind === "email" ? "" : (form.secret ?? "");
    if (form.kind === "webhook" && !secret && !form.hasSecret) errs.secret = "Enter a secret: it signs every delivery.";
    setLocal(errs);
    if (Object.keys(errs).length) return;
    const { id, hasSecret: _kept, secret: _typed, ...rest } = form;
    // An empty secret on an edit keeps the saved one (the API never shows it).
    const body = { ...rest, name: rest.name.trim(), target: rest.target.trim(), ...(secret ? { secret } : {}) };
    save.mutate({ body, id }, { onSuccess: () => setForm(EMPTY_CHANNEL) });
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
      {channels.data && channels.data.items.length === 0 && <EmptyState title="No channels">{mayEdit ? "Add an email, a webhook or an Alertmanager below." : "Ask an admin to add one."}</EmptyState>}
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
                                onClick={() => setForm({ id: c.id, name: c.name, kind: c.kind, target: c.target_redacted ? "" : c.target, enabled: c.enabled, secret: "", hasSecret: c.has_secret })}
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
              <select id="channel-kind" value={form.kind} onChange={(e) => setForm((f) => ({ ...f, kind: e.target.value as AlertChannel["kind"] }))} data-testid="channel-kind">
                <option value="email">email</option>
                <option value="webhook">webhook</option>
                <option value="alertmanager">Alertmanager</option>
              </select>
            </div>
            <div className="field">
              <label htmlFor="channel-target">{TARGET_LABEL[form.kind]}</label>
              <input
                id="channel-target"
                value={form.target}
                onChange={(e) => setForm((f) => ({ ...f, target: e.target.value }))}
                placeholder={form.kind === "alertmanager" ? "http://alertmanager:9093" : undefined}
                aria-describedby={form.kind === "alertmanager" ? "channel-target-hint" : undefined}
                data-testid="channel-target"
              />
              {form.kind === "alertmanager" && (
                <p className="muted small" id="channel-target-hint">
                  Alerts go to its API (/api/v2/alerts): sent when they fire, again every evaluation while they fire, and with their end when they resolve.
                </p>
              )}
              {err("target") && <p className="field-error" role="alert" data-testid="channel-error-target">{err("target")}</p>}
            </div>
            {SECRET_LABEL[form.kind] && (
              <div className="field field-medium">
                <label htmlFor="channel-secret">{SECRET_LABEL[form.kind]}</label>
                <input
                  id="channel-secret"
                  type="password"
                  autoComplete="new-password"
                  value={form.secret ?? ""}
                  onChange={(e) => setForm((f) => ({ ...f, secret: e.target.value }))}
                  placeholder={form.hasSecret ? "saved: leave empty to keep" : undefined}
                  data-testid="channel-secret"
                />
                {err("secret") && <p className="field-error" role="alert" data-testid="channel-error-secret">{err("secret")}</p>}
              </div>
            )}
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
          {formLevelMessage(save.error, new Set(["name", "kind", "target", "enabled", "secret"])) && (
            <p className="form-error" role="alert">
              {formLevelMessage(save.error, new Set(["name", "kind", "target", "enabled", "secret"]))}
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
