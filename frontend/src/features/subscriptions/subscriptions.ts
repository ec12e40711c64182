// Subscriptions and test messages: pure helpers for the namespace page's forms.

import type { CursorAction, CursorRequest, ProduceRequest } from "../../api/types";
import { localInputToIso } from "../../lib/filters";
import { parseDuration } from "../../lib/format";

export const CURSOR_ACTIONS: Record<CursorAction, { label: string; help: string }> = {
  earliest: {
    label: "Reset to earliest",
    help: "Move the cursor back to the start: every record still stored is delivered again.",
  },
  latest: { label: "Reset to latest", help: "Move the cursor to the end: everything stored now is skipped." },
  time: {
    label: "Reset to a time",
    help: "Move the cursor to just before the first record at or after a time, backward or forward.",
  },
  skip: { label: "Skip messages", help: "Acknowledge the next N messages of each chosen shard without reading them." },
  clear: { label: "Clear backlog", help: "Acknowledge everything up to the end: the backlog becomes 0." },
};

export interface CursorForm {
  action: CursorAction;
  /** "" = every shard */
  shard: string;
  /** datetime-local value */
  time: string;
  count: string;
}

/** The cursor request the form describes, or the problem with it (field → message). */
export function cursorRequest(form: CursorForm, confirm: string): { body?: CursorRequest; errors: Record<string, string> } {
  const body: CursorRequest = { action: form.action, confirm };
  if (form.shard !== "") body.shard = Number(form.shard);
  if (form.action === "time") {
    const iso = localInputToIso(form.time);
    if (!iso) return { errors: { timestamp: "Pick the date and time to start from." } };
    body.timestamp = Date.parse(iso);
  }
  if (form.action === "skip") {
    if (!/^\d+$/.test(form.count.trim()) || Number(form.count) < 1) {
      return { errors: { count: "How many messages: a whole number, 1 or more." } };
    }
    body.count = form.count.trim(); // decimal text: a JS number loses digits past 2^53
  }
  return { body, errors: {} };
}

export interface ProduceForm {
  key: string;
  value: string;
  tombstone: boolean;
  /** comma-separated */
  tags: string;
  /** one `name: value` per line */
  headers: string;
  /** a duration such as 1h; empty: no TTL */
  ttl: string;
  /** "" = by key (keyless round-robin) */
  shard: string;
}

export const EMPTY_PRODUCE_FORM: ProduceForm = { key: "", value: "", tombstone: false, tags: "", headers: "", ttl: "", shard: "" };

/** The produce request the form describes, or the problems with it (field → message). */
export function produceRequest(form: ProduceForm): { body?: ProduceRequest; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const body: ProduceRequest = { value: form.tombstone ? null : form.value };
  if (form.key !== "") body.key = form.key;
  if (form.tombstone && form.key === "") errors.value = "A tombstone needs a key: it deletes that key.";
  const tags = form.tags
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
  if (tags.length) body.tags = tags;
  const headers: Record<string, string> = {};
  for (const [i, line] of form.headers.split("\n").entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf(":");
    const name = at < 0 ? "" : line.slice(0, at).trim();
    if (!name) {
      errors.headers = `Line ${i + 1}: write a header as name: value.`;
      break;
    }
    headers[name] = line.slice(at + 1).trim();
  }
  if (Object.keys(headers).length) body.headers = headers;
  if (form.ttl.trim()) {
    try {
      const ms = parseDuration(form.ttl);
      if (ms === null || ms <= 0) errors.ttl_ms = "A TTL is a positive duration such as 1h (leave it empty for none).";
      else body.ttl_ms = ms;
    } catch (err) {
      errors.ttl_ms = err instanceof Error ? err.message : "Not a duration.";
    }
  }
  if (form.shard !== "") body.shard = Number(form.shard);
  return Object.keys(errors).length ? { errors } : { body, errors };
}
