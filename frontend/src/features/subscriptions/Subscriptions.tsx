// A namespace's subscriptions (kafka-ui's consumer groups, Pulsar Manager's subscriptions):
// backlog per shard in messages (offset distance), live records, bytes and age; create and
// delete (admin); reset a cursor to earliest / latest / a time, skip N or clear the backlog
// (operator). Every destructive change asks for the subscription's name.

import { Fragment, useState, type FormEvent } from "react";
import { errorMessage, isNotFound } from "../../api/client";
import { useCreateSubscription, useDeleteSubscription, useMe, useMoveCursor, useSubscriptions } from "../../api/queries";
import type { CursorAction, CursorResult, SubscriptionRow } from "../../api/types";
import { canAdminister, canOperate } from "../auth/roles";
import { formatBytes, formatCount, formatDuration, formatRelativeTime } from "../../lib/format";
import { useNow } from "../../lib/hooks";
import { CURSOR_ACTIONS, cursorRequest, type CursorForm } from "./subscriptions";
import { ConfirmByName } from "../../components/ConfirmByName";
import { FieldMessage, fieldErrorsOf } from "../../components/Form";
import { EmptyState, ErrorState, LoadingState, NotAvailableState } from "../../components/States";

const figure = (n: number | null | undefined, fmt: (v: number) => string = formatCount) => (n == null ? "—" : fmt(n));
const age = (ms: number | null | undefined) => (ms == null ? "—" : ms === 0 ? "none" : formatDuration(ms));

export function SubscriptionsPanel({ name, shards }: { name: string; shards: number }) {
  const subs = useSubscriptions(name);
  const { data: user } = useMe();
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [moving, setMoving] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const del = useDeleteSubscription(name);
  const now = useNow(30_000);

  if (subs.isPending) return <LoadingState label="Loading subscriptions…" />;
  if (subs.isError && !subs.data) {
    return isNotFound(subs.error) ? (
      <NotAvailableState feature="Subscriptions" testId="subscriptions-unavailable" />
    ) : (
      <ErrorState title="Could not load subscriptions" error={subs.error} onRetry={() => void subs.refetch()} />
    );
  }
  const rows = subs.data.results;
  const toggle = (sub: string) =>
    setOpen((o) => {
      const next = new Set(o);
      if (next.has(sub)) next.delete(sub);
      else next.add(sub);
      return next;
    });

  return (
    <section data-testid="subscriptions">
      <p className="muted small">
        Backlog per subscription: <strong>messages</strong> is the offset distance after the cursor (end − cursor − 1),{" "}
        <strong>live</strong> the records a consumer will still receive (expired and compacted ones left out),{" "}
        <strong>age</strong> how old the oldest unacknowledged record is. Each is the sum (age: the oldest) over the shards.
      </p>
      {subs.data.node_error && (
        <div className="banner banner-warn" role="alert" data-testid="subscriptions-node-error">
          Some shards did not answer: {subs.data.node_error}
        </div>
      )}
      {canAdminister(user) && <CreateSubscription name={name} />}
      {rows.length === 0 ? (
        <EmptyState title="No subscriptions yet">
          {canAdminister(user) ? "Create one above: it keeps a cursor per shard." : "An admin can create one."}
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact" data-testid="subscriptions-table">
            <thead>
              <tr>
                <th scope="col">Subscription</th>
                <th scope="col" className="num">
                  Messages
                </th>
                <th scope="col" className="num">
                  Live
                </th>
                <th scope="col" className="num">
                  Bytes
                </th>
                <th scope="col" className="num">
                  Age
                </th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((s) => (
                <Fragment key={s.name}>
                  <tr data-testid={`subscription-row-${s.name}`} className={moving === s.name ? "is-selected" : undefined}>
                    <th scope="row">
                      <span className="mono">{s.name}</span>
                      <div className="muted small">started at {s.initial}</div>
                    </th>
                    <td className="num" data-testid={`subscription-messages-${s.name}`}>
                      {figure(s.messages)}
                    </td>
                    <td className="num" data-testid={`subscription-live-${s.name}`}>
                      {figure(s.live_messages)}
                    </td>
                    <td className="num">{figure(s.bytes, (v) => formatBytes(v))}</td>
                    <td className="num" data-testid={`subscription-age-${s.name}`}>
                      {age(s.age_ms)}
                    </td>
                    <td className="small">{formatRelativeTime(s.created_at, now)}</td>
                    <td>
                      <div className="button-row">
                        <button
                          type="button"
                          className="button button-small"
                          aria-expanded={open.has(s.name)}
                          onClick={() => toggle(s.name)}
                          disabled={!s.backlog}
                          data-testid={`subscription-expand-${s.name}`}
                        >
                          {open.has(s.name) ? "Hide shards" : "Shards"}
                        </button>
                        {canOperate(user) && (
                          <button
                            type="button"
                            className="button button-small"
                            onClick={() => {
                              setDeleting(null);
                              setMoving(moving === s.name ? null : s.name);
                            }}
                            data-testid={`subscription-cursor-${s.name}`}
                          >
                            Move cursor…
                          </button>
                        )}
                        {canAdminister(user) && (
                          <button
                            type="button"
                            className="button button-small button-danger-outline"
                            onClick={() => {
                              setMoving(null);
                              del.reset();
                              setDeleting(s.name);
                            }}
                            data-testid={`subscription-delete-${s.name}`}
                          >
                            Delete…
                          </button>
                        )}
                      </div>
                    </td>
                  </tr>
                  {open.has(s.name) && s.backlog && (
                    <tr>
                      <td colSpan={7}>
                        <ShardBacklogTable sub={s} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {moving && (
        <MoveCursor key={moving} name={name} sub={moving} shards={shards} onDone={() => setMoving(null)} />
      )}
      {deleting && (
        <ConfirmByName
          name={deleting}
          title={`Delete subscription ${deleting}`}
          confirmLabel="Delete subscription"
          pending={del.isPending}
          error={del.error}
          onCancel={() => setDeleting(null)}
          onConfirm={(typed) => del.mutate({ subscription: deleting, confirm: typed }, { onSuccess: () => setDeleting(null) })}
        >
          <p>Its cursors are lost: a subscription created again under this name starts over.</p>
        </ConfirmByName>
      )}
    </section>
  );
}

function ShardBacklogTable({ sub }: { sub: SubscriptionRow }) {
  return (
    <table className="table table-compact" data-testid={`subscription-shards-${sub.name}`}>
      <thead>
        <tr>
          <th scope="col">Shard</th>
          <th scope="col" className="num" title="Mark-delete position: everything at or below it is acknowledged">
            Cursor
          </th>
          <th scope="col" className="num">
            End offset
          </th>
          <th scope="col" className="num">
            Messages
          </th>
          <th scope="col" className="num">
            Live
          </th>
          <th scope="col" className="num">
            Bytes
          </th>
          <th scope="col" className="num">
            Age
          </th>
        </tr>
      </thead>
      <tbody>
        {(sub.backlog ?? []).map((b) => (
          <tr key={b.shard} data-testid={`subscription-shard-${sub.name}-${b.shard}`}>
            <th scope="row">{b.shard}</th>
            <td className="num mono" data-testid={`subscription-shard-cursor-${sub.name}-${b.shard}`}>
              {b.cursor}
            </td>
            <td className="num mono" data-testid={`subscription-shard-end-${sub.name}-${b.shard}`}>
              {b.end_offset}
            </td>
            <td className="num" data-testid={`subscription-shard-messages-${sub.name}-${b.shard}`}>
              {formatCount(b.messages)}
            </td>
            <td className="num" data-testid={`subscription-shard-live-${sub.name}-${b.shard}`}>
              {formatCount(b.live_messages)}
            </td>
            <td className="num">{formatBytes(b.bytes)}</td>
            <td className="num">{age(b.age_ms)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * One field of the create and cursor forms: the label, the control (a select when given ``options``,
 * else an input), and its error line beneath (the client's check first, else the server's), which the
 * control is described by.
 */
function FormField<T extends string>({
  id,
  label,
  value,
  onChange,
  testId,
  options,
  errors,
  errorTestId,
  wide,
  ...input
}: {
  id: string;
  label: string;
  value: T;
  onChange: (value: T) => void;
  testId: string;
  options?: readonly { value: T; label: string }[];
  errors?: string[];
  errorTestId?: string;
  wide?: boolean;
  type?: string;
  inputMode?: "numeric";
  autoComplete?: string;
}) {
  const control = { id, value, "data-testid": testId, "aria-describedby": errors?.length ? `${id}-error` : undefined };
  return (
    <div className={wide ? "field field-wide" : "field"}>
      <label htmlFor={id}>{label}</label>
      {options ? (
        <select {...control} onChange={(e) => onChange(e.target.value as T)}>
          {options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
      ) : (
        <input {...control} {...input} onChange={(e) => onChange(e.target.value as T)} />
      )}
      <FieldMessage id={id} errors={errors} testId={errorTestId} />
    </div>
  );
}

const INITIAL_OPTIONS = [
  { value: "earliest", label: "earliest (everything stored)" },
  { value: "latest", label: "latest (new records only)" },
] as const;

const ACTION_OPTIONS = (Object.keys(CURSOR_ACTIONS) as CursorAction[]).map((a) => ({ value: a, label: CURSOR_ACTIONS[a].label }));

/** "" (every shard) or a shard number, as the cursor form holds it. */
const shardLabel = (shard: string) => (shard === "" ? "every shard" : `shard ${shard}`);

const shardOptions = (shards: number) =>
  ["", ...Array.from({ length: shards }, (_, i) => String(i))].map((value) => ({ value, label: shardLabel(value) }));

function CreateSubscription({ name }: { name: string }) {
  const create = useCreateSubscription(name);
  const [sub, setSub] = useState("");
  const [initial, setInitial] = useState<"earliest" | "latest">("earliest");
  const errors = fieldErrorsOf(create.error);
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name: sub.trim(), initial }, { onSuccess: () => setSub("") });
  };
  return (
    <form className="filters" onSubmit={onSubmit} aria-label="Create a subscription" data-testid="subscription-create">
      <FormField
        id="sub-create-name"
        label="New subscription"
        value={sub}
        onChange={setSub}
        autoComplete="off"
        testId="subscription-create-name"
        errors={errors.name}
        errorTestId="subscription-create-error"
      />
      <FormField id="sub-create-initial" label="Starts at" value={initial} options={INITIAL_OPTIONS} onChange={setInitial} testId="subscription-create-initial" />
      <div className="field field-action">
        <button type="submit" className="button" disabled={create.isPending || !sub.trim()} data-testid="subscription-create-submit">
          {create.isPending ? "Creating…" : "Create"}
        </button>
      </div>
      {create.isError && !errors.name && (
        <p className="form-error" role="alert" data-testid="subscription-create-error">
          {errorMessage(create.error)}
        </p>
      )}
    </form>
  );
}

function MoveCursor({ name, sub, shards, onDone }: { name: string; sub: string; shards: number; onDone: () => void }) {
  const move = useMoveCursor(name);
  const [form, setForm] = useState<CursorForm>({ action: "earliest", shard: "", time: "", count: "" });
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [result, setResult] = useState<CursorResult | null>(null);
  const [done, setDone] = useState(0); // a new confirmation after each move
  const serverErrors = fieldErrorsOf(move.error);
  const fieldError = (field: string) => (problems[field] ? [problems[field]!] : serverErrors[field]);
  const set = (patch: Partial<CursorForm>) => {
    setForm((f) => ({ ...f, ...patch }));
    setProblems({});
    move.reset();
  };

  return (
    <section className="card section" aria-labelledby="cursor-title" data-testid="cursor-panel">
      <h3 id="cursor-title">
        Move the cursor of <span className="mono">{sub}</span>
      </h3>
      <div className="filters">
        <FormField id="cursor-action" label="Action" value={form.action} options={ACTION_OPTIONS} onChange={(action) => set({ action })} testId="cursor-action" />
        <FormField
          id="cursor-shard"
          label="Shards"
          value={form.shard}
          options={shardOptions(shards)}
          onChange={(shard) => set({ shard })}
          testId="cursor-shard"
          errors={serverErrors.shard}
        />
        {form.action === "time" && (
          <FormField
            id="cursor-time"
            label="Time (your zone)"
            type="datetime-local"
            value={form.time}
            onChange={(time) => set({ time })}
            testId="cursor-time"
            errors={fieldError("timestamp")}
            errorTestId="cursor-error-timestamp"
            wide
          />
        )}
        {form.action === "skip" && (
          <FormField
            id="cursor-count"
            label="Messages per shard"
            inputMode="numeric"
            value={form.count}
            onChange={(count) => set({ count })}
            testId="cursor-count"
            errors={fieldError("count")}
            errorTestId="cursor-error-count"
          />
        )}
      </div>
      <ConfirmByName
        key={`${form.action}-${form.shard}-${done}`}
        name={sub}
        title={`${CURSOR_ACTIONS[form.action].label}: ${sub}, ${shardLabel(form.shard)}`}
        confirmLabel={CURSOR_ACTIONS[form.action].label}
        pending={move.isPending}
        error={move.isError && !serverErrors.count && !serverErrors.timestamp ? move.error : undefined}
        onCancel={onDone}
        onConfirm={(typed) => {
          const { body, errors } = cursorRequest(form, typed);
          setProblems(errors);
          if (!body) return;
          move.mutate(
            { subscription: sub, body },
            {
              onSuccess: (r) => {
                setResult(r);
                setDone((d) => d + 1);
              },
            },
          );
        }}
      >
        <p>{CURSOR_ACTIONS[form.action].help}</p>
      </ConfirmByName>
      {result && (
        <div className="form-success" role="status" data-testid="cursor-result">
          {CURSOR_ACTIONS[result.action].label} done:{" "}
          {result.moves.map((m) => `shard ${m.shard}: ${m.before} → ${m.after}`).join("; ")}. Backlog now{" "}
          {figure(result.subscription.messages)} messages.
        </div>
      )}
    </section>
  );
}
