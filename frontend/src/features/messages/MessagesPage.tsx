import { useEffect, useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { errorMessage } from "../../api/client";
import { useMessages, useNamespaces } from "../../api/queries";
import type { MessagePage, MessageRecord, OutOfRange, Shown } from "../../api/types";
import { Field } from "../../components/Field";
import { Badge, EmptyState, ErrorState, LoadingState } from "../../components/States";
import { formatBytes, formatDateTime, formatRelativeTime, toDate } from "../../lib/format";
import { localInputToIso } from "../../lib/filters";
import { useNow, usePageTitle } from "../../lib/hooks";
import {
  ALL_SHARDS,
  hasNextPage,
  jumpSearch,
  messageQueryFromSearch,
  namespaceSearch,
  nextPageSearch,
  outOfRangeMessage,
  outOfRangeOf,
  type BrowseMode,
} from "./messages";

function modeOf(search: URLSearchParams): BrowseMode {
  if (search.get("key")) return "key";
  if (search.get("tag")) return "tag";
  if (search.get("time")) return "time";
  return "offset";
}

/** epoch ms → value for <input type="datetime-local"> in the browser's zone. */
function toLocalInput(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The browse form as the URL describes it. */
function formFrom(search: URLSearchParams) {
  return {
    namespace: search.get("namespace") ?? "",
    shard: search.get("shard") ?? (search.get("namespace") && (search.get("key") || search.get("time") || search.get("positions")) ? ALL_SHARDS : "0"),
    everyShard: search.get("all_shards") === "true",
    mode: modeOf(search),
    offset: search.get("offset") ?? "0",
    time: search.get("time") ? toLocalInput(Number(search.get("time"))) : "",
    key: search.get("key") ?? "",
    tag: search.get("tag") ?? "",
    limit: search.get("limit") ?? "50",
  };
}

export default function MessagesPage() {
  usePageTitle("Messages");
  const [search, setSearch] = useSearchParams();
  const namespaces = useNamespaces();
  const { query, problem } = messageQueryFromSearch(search);
  const namespace = search.get("namespace") ?? "";
  const messages = useMessages(namespace, query);
  const [history, setHistory] = useState<string[]>([]);

  const [form, setForm] = useState(() => formFrom(search));
  const [formError, setFormError] = useState<string | null>(null);
  // Paging and "jump" change the URL: the form follows the offset it now reads from.
  const urlOffset = search.get("offset");
  useEffect(() => {
    if (urlOffset !== null) setForm((f) => (f.offset === urlOffset ? f : { ...f, offset: urlOffset, mode: modeOf(search) }));
  }, [urlOffset]);
  // Another namespace in the URL (a link, Back): the form reads it afresh, and the history was the last one's.
  useEffect(() => {
    setForm((f) => (f.namespace === namespace ? f : formFrom(search)));
    setHistory([]);
  }, [namespace]);
  const display = search.get("display") === "hex" ? "hex" : "text";
  const shardCount = namespaces.data?.items.find((n) => n.name === form.namespace)?.shards;

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const next = new URLSearchParams();
    if (!form.namespace) return setFormError("Choose a namespace.");
    const allShards = form.shard === ALL_SHARDS;
    if (allShards && (form.mode === "offset" || form.mode === "tag")) {
      return setFormError("Choose a shard to read from an offset or by tag; every shard works by key or by time.");
    }
    if (!allShards && !/^\d+$/.test(form.shard)) return setFormError("The shard is a whole number (0, 1, …).");
    next.set("namespace", form.namespace);
    if (!allShards) next.set("shard", form.shard);
    if (allShards && form.mode === "key" && form.everyShard) next.set("all_shards", "true");
    if (form.mode === "offset") {
      if (!/^\d+$/.test(form.offset.trim() || "0")) return setFormError("The offset is a whole number.");
      next.set("offset", form.offset.trim() || "0");
    } else if (form.mode === "time") {
      const iso = localInputToIso(form.time);
      if (!iso) return setFormError("Pick a date and time to start from.");
      next.set("time", String(Date.parse(iso)));
    } else {
      const value = form[form.mode].trim();
      if (!value) return setFormError(`Enter a ${form.mode} to look for.`);
      next.set(form.mode, value);
    }
    next.set("limit", form.limit);
    if (display === "hex") next.set("display", "hex");
    setFormError(null);
    setHistory([]);
    setSearch(next);
  };

  // Another namespace starts afresh: the last one's records, position and pages go, never shown under the new name.
  const chooseNamespace = (name: string) => {
    setForm((f) => ({ ...f, namespace: name, shard: "0" }));
    setFormError(null);
    setSearch(namespaceSearch(name));
  };

  const setDisplay = (d: "text" | "hex") => {
    const next = new URLSearchParams(search);
    if (d === "hex") next.set("display", "hex");
    else next.delete("display");
    setSearch(next, { replace: true });
  };

  const goNext = () => {
    if (!messages.data || !hasNextPage(messages.data)) return;
    setHistory((h) => [...h, search.toString()]);
    setSearch(nextPageSearch(search, messages.data));
  };
  const jumpTo = (offset: number) => {
    setHistory((h) => [...h, search.toString()]);
    setSearch(jumpSearch(search, offset));
  };
  const outOfRange = messages.isError ? outOfRangeOf(messages.error) : null;
  const allShards = query !== null && query.shard === undefined;
  const goBack = () => {
    const prev = history.at(-1);
    if (prev === undefined) return;
    setHistory((h) => h.slice(0, -1));
    setSearch(new URLSearchParams(prev));
  };

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Messages</h1>
          <p className="muted">Read a shard from an offset or a time, or find records by key or tag. Expired records are not shown.</p>
        </div>
      </div>
      <form className="filters" onSubmit={onSubmit} aria-label="Browse messages" data-testid="messages-form">
        <Field id="msg-namespace" label="Namespace">
          <select
            id="msg-namespace"
            value={form.namespace}
            onChange={(e) => chooseNamespace(e.target.value)}
            data-testid="messages-namespace"
          >
            <option value="">choose…</option>
            {(namespaces.data?.items ?? []).map((n) => (
              <option key={n.name} value={n.name}>
                {n.name}
              </option>
            ))}
            {form.namespace && !namespaces.data?.items.some((n) => n.name === form.namespace) && (
              <option value={form.namespace}>{form.namespace}</option>
            )}
          </select>
        </Field>
        <Field id="msg-shard" label="Shard" hint={shardCount ? `0 to ${shardCount - 1}, or every shard by key or time` : undefined}>
          {shardCount ? (
            <select id="msg-shard" value={form.shard} onChange={(e) => setForm((f) => ({ ...f, shard: e.target.value }))} data-testid="messages-shard">
              <option value={ALL_SHARDS}>every shard</option>
              {Array.from({ length: shardCount }, (_, i) => (
                <option key={i} value={String(i)}>
                  {i}
                </option>
              ))}
            </select>
          ) : (
            <input id="msg-shard" value={form.shard} inputMode="numeric" onChange={(e) => setForm((f) => ({ ...f, shard: e.target.value }))} data-testid="messages-shard" />
          )}
        </Field>
        <Field id="msg-mode" label="Start">
          <select id="msg-mode" value={form.mode} onChange={(e) => setForm((f) => ({ ...f, mode: e.target.value as BrowseMode }))} data-testid="messages-mode">
            <option value="offset">from offset</option>
            <option value="time">from time</option>
            <option value="key">by key</option>
            <option value="tag">by tag</option>
          </select>
        </Field>
        {form.mode === "offset" && (
          <Field id="msg-offset" label="Offset">
            <input id="msg-offset" value={form.offset} inputMode="numeric" onChange={(e) => setForm((f) => ({ ...f, offset: e.target.value }))} data-testid="messages-offset" />
          </Field>
        )}
        {form.mode === "time" && (
          <Field id="msg-time" label="Time (your zone)" wide>
            <input id="msg-time" type="datetime-local" value={form.time} onChange={(e) => setForm((f) => ({ ...f, time: e.target.value }))} data-testid="messages-time" />
          </Field>
        )}
        {(form.mode === "key" || form.mode === "tag") && (
          <Field id="msg-value" label={form.mode === "key" ? "Key" : "Tag"} wide>
            <input
              id="msg-value"
              value={form[form.mode]}
              onChange={(e) => setForm((f) => ({ ...f, [f.mode]: e.target.value }))}
              data-testid="messages-value"
            />
          </Field>
        )}
        {form.mode === "key" && form.shard === ALL_SHARDS && (
          <label className="check" htmlFor="msg-every-shard">
            <input
              id="msg-every-shard"
              type="checkbox"
              checked={form.everyShard}
              onChange={(e) => setForm((f) => ({ ...f, everyShard: e.target.checked }))}
              data-testid="messages-every-shard"
            />
            Ask every shard (not only until one has the key)
          </label>
        )}
        <Field id="msg-limit" label="Per page">
          <select id="msg-limit" value={form.limit} onChange={(e) => setForm((f) => ({ ...f, limit: e.target.value }))} data-testid="messages-limit">
            {["20", "50", "100", "200"].map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </Field>
        <div className="button-row">
          <button type="submit" className="button button-primary" data-testid="messages-browse">
            Browse
          </button>
        </div>
        {formError && (
          <p className="form-error" role="alert" data-testid="messages-form-error">
            {formError}
          </p>
        )}
      </form>

      <div className="toolbar">
        <div className="segmented" role="group" aria-label="Show values as">
          {(["text", "hex"] as const).map((d) => (
            <button key={d} type="button" aria-pressed={display === d} onClick={() => setDisplay(d)} data-testid={`display-${d}`}>
              {d}
            </button>
          ))}
        </div>
        {messages.isFetching && <span className="muted small">loading…</span>}
      </div>

      {!query && <EmptyState title="Nothing to show yet">{problem} Then press Browse.</EmptyState>}
      {query && messages.isPending && <LoadingState label="Reading messages…" />}
      {query && outOfRange && <OutOfRangeBanner o={outOfRange} limit={query.limit ?? 50} onJump={jumpTo} />}
      {query && messages.isError && !outOfRange && !messages.data && (
        <ErrorState title="Could not read messages" error={messages.error} onRetry={() => void messages.refetch()} />
      )}
      {query && messages.isError && !outOfRange && messages.data && (
        <div className="banner banner-warn" role="alert">
          {errorMessage(messages.error)}
        </div>
      )}
      {query && messages.data && !outOfRange && (
        <>
          {query.key !== undefined && <KeyAnswer page={messages.data} everyShard={allShards} />}
          {messages.data.records.length === 0 ? (
            <EmptyState title="No records here">
              {query.key !== undefined
                ? "No visible record has this key: it may never have been written, or it expired or was deleted."
                : "Nothing visible from this position: the range may be empty or expired. Try offset 0 or an earlier time."}
            </EmptyState>
          ) : (
            <MessagesTable records={messages.data.records} showShard={allShards} />
          )}
          <nav className="pager" aria-label="Message pages">
            <button type="button" className="button" onClick={goBack} disabled={history.length === 0} data-testid="messages-prev">
              ‹ Back
            </button>
            <button
              type="button"
              className="button"
              onClick={goNext}
              disabled={!hasNextPage(messages.data)}
              data-testid="messages-next"
            >
              Next page ›
            </button>
            <span className="muted small">
              {pagerNote(messages.data)}
            </span>
          </nav>
        </>
      )}
    </div>
  );
}

/** When the record expires: the server's effective expiry (its TTL or the namespace's, whichever is first). */
function expiryText(r: MessageRecord, now: number): string {
  const at = r.effective_expires_at !== undefined ? r.effective_expires_at : r.expire_at;
  if (at == null || !toDate(at)) return "no expiry";
  const own = r.expire_at != null && r.expire_at === at;
  const title = r.effective_expires_at === undefined ? "" : own ? " (its own TTL)" : " (namespace TTL)";
  return `expires ${formatRelativeTime(at, now)}${title}`;
}

function pagerNote(page: MessagePage): string {
  if (page.next_positions != null) return `Next page goes on in every shard from ${page.next_positions.replace(/,/g, ", ")} (shard:offset).`;
  if (page.next_offset != null) return `Next page starts at offset ${page.next_offset}.`;
  return "Nothing more to read.";
}

function OutOfRangeBanner({ o, limit, onJump }: { o: OutOfRange; limit: number; onJump: (offset: number) => void }) {
  const below = o.offset < o.log_start_offset;
  return (
    <div className="banner banner-warn" role="alert" data-testid="messages-out-of-range">
      <p>{outOfRangeMessage(o)}.</p>
      <p className="small muted">
        Shard {o.shard} holds offsets {o.log_start_offset} to {Math.max(o.log_start_offset, o.end_offset - 1)}
        {o.end_offset === o.log_start_offset ? " (nothing stored now)" : ""}.
      </p>
      {below ? (
        <button type="button" className="button" onClick={() => onJump(o.log_start_offset)} data-testid="messages-jump-log-start">
          Jump to log start ({o.log_start_offset})
        </button>
      ) : (
        <button
          type="button"
          className="button"
          onClick={() => onJump(Math.max(o.log_start_offset, o.end_offset - limit))}
          data-testid="messages-jump-end"
        >
          Show the latest records
        </button>
      )}
    </div>
  );
}

/** Which shard answered a key lookup, and which were asked. */
function KeyAnswer({ page, everyShard }: { page: MessagePage; everyShard: boolean }) {
  if (!everyShard) return null;
  const asked = page.shards ?? [];
  const answered = [...new Set(page.records.map((r) => r.shard))];
  return (
    <p className="small" role="status" data-testid="messages-key-shard">
      {answered.length === 0 ? "Not found" : `Found on shard ${answered.join(", ")}`}
      {page.key_shard !== undefined && ` · by placement the key belongs on shard ${page.key_shard}`}
      {asked.length > 0 && ` · asked shard${asked.length === 1 ? "" : "s"} ${asked.join(", ")}`}.
    </p>
  );
}

function ShownValue({ v, testId }: { v: Shown | null; testId?: string }) {
  if (!v) return <span className="muted">no key</span>;
  if (v.tombstone) return <Badge tone="warn">tombstone</Badge>;
  const body = v.text ?? v.hex;
  return (
    <span data-testid={testId}>
      <span className={v.text === null ? "mono" : undefined}>{body ?? ""}</span>
      {v.text === null && v.hex !== null && <span className="muted small"> (hex)</span>}
      {v.truncated && <span className="muted small"> … truncated, {formatBytes(v.size)} in all</span>}
      {!v.truncated && <span className="muted small"> · {formatBytes(v.size)}</span>}
    </span>
  );
}

function MessagesTable({ records, showShard }: { records: MessageRecord[]; showShard: boolean }) {
  const now = useNow();
  // Across shards offsets repeat: the row's id names its shard too.
  const rowId = (r: MessageRecord) => (showShard ? `${r.shard}-${r.offset}` : String(r.offset));
  return (
    <div className="table-wrap">
      <table className="table table-compact" data-testid="messages-table">
        <thead>
          <tr>
            {showShard && <th scope="col">Shard</th>}
            <th scope="col" className="num">
              Offset
            </th>
            <th scope="col">Time</th>
            <th scope="col">Key</th>
            <th scope="col">Value</th>
            <th scope="col">Tags / headers</th>
          </tr>
        </thead>
        <tbody>
          {records.map((r) => (
            <tr key={rowId(r)} data-testid={`message-row-${rowId(r)}`}>
              {showShard && <td className="mono">{r.shard}</td>}
              <th scope="row" className="num mono">
                {r.offset}
              </th>
              <td>
                {formatDateTime(r.timestamp)}
                <div className="muted small" data-testid={`message-expiry-${rowId(r)}`}>
                  {expiryText(r, now)}
                </div>
              </td>
              <td className="value-cell mono">
                <ShownValue v={r.key} />
              </td>
              <td className="value-cell">
                <ShownValue v={r.value} testId={`message-value-${rowId(r)}`} />
              </td>
              <td className="small">
                {r.tags.map((t) => (
                  <Badge key={t} tone="neutral">
                    {t}
                  </Badge>
                ))}
                {Object.entries(r.headers).map(([k, v]) => (
                  <div key={k}>
                    <span className="muted">{k}:</span> <ShownValue v={v} />
                  </div>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
