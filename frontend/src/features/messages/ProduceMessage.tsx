// Produce a test message from the namespace page (as kafka-ui and Redpanda Console do):
// key, tags, headers, value, TTL; placed by key or on a chosen shard. Operators only.

import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { useMe, useProduceMessage } from "../../api/queries";
import { canOperate } from "../auth/roles";
import { EMPTY_PRODUCE_FORM, produceRequest, type ProduceForm } from "../subscriptions/subscriptions";
import { FieldMessage, fieldErrorsOf, formLevelMessage } from "../../components/Form";

const FIELDS = new Set(["key", "value", "tags", "headers", "ttl_ms", "shard"]);

export function ProduceMessagePanel({ name, shards }: { name: string; shards: number }) {
  const { data: user } = useMe();
  const produce = useProduceMessage(name);
  const [form, setForm] = useState<ProduceForm>(EMPTY_PRODUCE_FORM);
  const [problems, setProblems] = useState<Record<string, string>>({});
  if (!canOperate(user)) return <p className="muted small">Producing a test message needs the operator role.</p>;

  const server = fieldErrorsOf(produce.error);
  const errorsOf = (field: string) => (problems[field] ? [problems[field]!] : server[field]);
  const formError = formLevelMessage(produce.error, FIELDS);
  const set = (patch: Partial<ProduceForm>) => setForm((f) => ({ ...f, ...patch }));
  const described = (field: string, id: string) => (errorsOf(field) ? `${id}-error` : `${id}-hint`);

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    produce.reset(); // the last record's "Stored on…" never stands beside this attempt's errors
    const { body, errors } = produceRequest(form);
    setProblems(errors);
    if (!body) return;
    produce.mutate(body);
  };
  const placed = produce.data;

  return (
    <section data-testid="produce-panel">
      <p className="muted small">
        Write one record to this namespace, as a producer would. Without a shard it goes to the key's shard (
        <code>crc32(key) mod shards</code>), a keyless one round-robin. Audited.
      </p>
      <form className="filters" onSubmit={onSubmit} aria-label="Produce a test message" data-testid="produce-form">
        <div className="field">
          <label htmlFor="produce-key">Key</label>
          <input id="produce-key" value={form.key} onChange={(e) => set({ key: e.target.value })} autoComplete="off" data-testid="produce-key" aria-describedby={described("key", "produce-key")} />
          <FieldMessage id="produce-key" errors={errorsOf("key")} hint="Optional; places the record." testId="produce-error-key" />
        </div>
        <div className="field field-wide">
          <label htmlFor="produce-value">Value (text)</label>
          <textarea
            id="produce-value"
            value={form.value}
            rows={3}
            disabled={form.tombstone}
            onChange={(e) => set({ value: e.target.value })}
            data-testid="produce-value"
            aria-describedby={described("value", "produce-value")}
          />
          <FieldMessage id="produce-value" errors={errorsOf("value")} hint="UTF-8 text." testId="produce-error-value" />
          <label className="check" htmlFor="produce-tombstone">
            <input id="produce-tombstone" type="checkbox" checked={form.tombstone} onChange={(e) => set({ tombstone: e.target.checked })} data-testid="produce-tombstone" />
            Tombstone (no value: deletes the key under compaction)
          </label>
        </div>
        <div className="field">
          <label htmlFor="produce-tags">Tags</label>
          <input id="produce-tags" value={form.tags} onChange={(e) => set({ tags: e.target.value })} autoComplete="off" data-testid="produce-tags" aria-describedby={described("tags", "produce-tags")} />
          <FieldMessage id="produce-tags" errors={errorsOf("tags")} hint="Comma-separated." testId="produce-error-tags" />
        </div>
        <div className="field field-wide">
          <label htmlFor="produce-headers">Headers</label>
          <textarea
            id="produce-headers"
            value={form.headers}
            rows={2}
            onChange={(e) => set({ headers: e.target.value })}
            placeholder="trace-id: abc"
            data-testid="produce-headers"
            aria-describedby={described("headers", "produce-headers")}
          />
          <FieldMessage id="produce-headers" errors={errorsOf("headers")} hint="One name: value per line." testId="produce-error-headers" />
        </div>
        <div className="field">
          <label htmlFor="produce-ttl">TTL</label>
          <input id="produce-ttl" value={form.ttl} onChange={(e) => set({ ttl: e.target.value })} placeholder="e.g. 1h" autoComplete="off" data-testid="produce-ttl" aria-describedby={described("ttl_ms", "produce-ttl")} />
          <FieldMessage id="produce-ttl" errors={errorsOf("ttl_ms")} hint="Optional: expires this long from now." testId="produce-error-ttl_ms" />
        </div>
        <div className="field">
          <label htmlFor="produce-shard">Shard</label>
          <select id="produce-shard" value={form.shard} onChange={(e) => set({ shard: e.target.value })} data-testid="produce-shard">
            <option value="">by key</option>
            {Array.from({ length: shards }, (_, i) => (
              <option key={i} value={String(i)}>
                shard {i}
              </option>
            ))}
          </select>
          <FieldMessage id="produce-shard" errors={errorsOf("shard")} testId="produce-error-shard" />
        </div>
        <div className="field field-action">
          <button type="submit" className="button button-primary" disabled={produce.isPending} data-testid="produce-submit">
            {produce.isPending ? "Producing…" : "Produce"}
          </button>
        </div>
      </form>
      {formError && (
        <p className="form-error" role="alert" data-testid="produce-error">
          {formError}
        </p>
      )}
      {placed && !produce.isError && (
        <p className="form-success" role="status" data-testid="produce-result">
          Stored on shard <strong>{placed.shard}</strong> at offset <strong>{placed.offset}</strong> (node {placed.node}).{" "}
          <Link
            to={`/messages?namespace=${encodeURIComponent(name)}&shard=${placed.shard}&offset=${placed.offset}`}
            data-testid="produce-result-link"
          >
            See it in Messages
          </Link>
        </p>
      )}
    </section>
  );
}
