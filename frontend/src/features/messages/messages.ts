// Message browser: URL search params ⇄ a browse query, paging, and the out-of-range answer.

import { ApiError } from "../../api/client";
import type { MessagePage, MessageQuery, OutOfRange } from "../../api/types";

export type BrowseMode = "offset" | "time" | "key" | "tag";

/** The shard select's value for "every shard" (by key or by time only). */
export const ALL_SHARDS = "all";

/** A small count (shard, page size) as a number. */
const digits = (v: string | null) => (v !== null && /^\d+$/.test(v) ? Number(v) : undefined);
/**
 * A 64-bit figure (offset, epoch ms) kept as its decimal text: a JS number holds 53 bits, so
 * 99999999999999999999 or 9007199254740993 would become another number. The API reads the text.
 */
const decimal = (v: string | null) => (v !== null && /^\d+$/.test(v) ? v : undefined);

/** The browse query described by URL params, or null with the reason when incomplete. */
export function messageQueryFromSearch(search: URLSearchParams): { query: MessageQuery | null; problem?: string } {
  if (!search.get("namespace")) return { query: null, problem: "Choose a namespace." };
  const shardText = search.get("shard");
  const shard = digits(shardText);
  if (shardText !== null && shard === undefined) return { query: null, problem: "Choose a shard." };
  const q: MessageQuery = {};
  if (shard !== undefined) q.shard = shard;
  const offset = decimal(search.get("offset"));
  const time = decimal(search.get("time"));
  const key = search.get("key");
  const tag = search.get("tag");
  const positions = search.get("positions");
  if (key) q.key = key;
  else if (tag) q.tag = tag;
  if (shard === undefined && !q.key) {
    // Every shard: by key, or by time (a later page continues from `positions`).
    if (positions) q.positions = positions;
    else if (time !== undefined && !q.tag) q.time = time;
    else return { query: null, problem: "Choose a shard (every shard works by key or by time)." };
  } else if (!q.key) {
    if (offset !== undefined) q.offset = offset;
    else if (time !== undefined && !q.tag) q.time = time;
  }
  if (q.key && shard === undefined && search.get("all_shards") === "true") q.all_shards = true;
  const limit = digits(search.get("limit"));
  q.limit = limit !== undefined ? Math.min(200, Math.max(1, limit)) : 50;
  q.display = search.get("display") === "hex" ? "hex" : "text";
  return { query: q };
}

/** Whether this page has a next one to go to. */
export function hasNextPage(page: MessagePage): boolean {
  return page.next_positions != null || page.next_offset != null;
}

/** Search params for the page after this one: one shard from `next_offset`, every shard from `next_positions`. */
export function nextPageSearch(search: URLSearchParams, page: Pick<MessagePage, "next_offset" | "next_positions">): URLSearchParams {
  const next = new URLSearchParams(search);
  next.delete("time");
  if (page.next_positions != null) {
    next.set("positions", page.next_positions);
    next.delete("offset");
  } else if (page.next_offset != null) {
    next.set("offset", String(page.next_offset));
  }
  return next;
}

/** The bounds of a read below the log start or past the end (a 416), or null for any other error. */
export function outOfRangeOf(error: unknown): OutOfRange | null {
  if (!(error instanceof ApiError) || error.status !== 416) return null;
  const body = error.body as Partial<OutOfRange> | null;
  if (!body || typeof body.log_start_offset !== "number" || typeof body.end_offset !== "number") return null;
  return body as OutOfRange;
}

/** The words for an out-of-range read. */
export function outOfRangeMessage(o: OutOfRange): string {
  return o.offset < o.log_start_offset
    ? `offset ${o.offset} is below the log start ${o.log_start_offset} (deleted by retention/expiry)`
    : `offset ${o.offset} is past the end of shard ${o.shard} (end offset ${o.end_offset})`;
}

/** Search params that read the same shard from `offset` instead. */
export function jumpSearch(search: URLSearchParams, offset: number): URLSearchParams {
  const next = new URLSearchParams(search);
  for (const k of ["time", "positions", "key", "tag"]) next.delete(k);
  next.set("offset", String(offset));
  return next;
}

/**
 * The message browser's placeholder while a new page loads: the previous page only when it is of the
 * same namespace (paging on), never another namespace's records under the new name.
 */
export function samePlaceholder(namespace: string) {
  return <T>(previous: T | undefined, previousQuery?: { queryKey: readonly unknown[] }): T | undefined =>
    previousQuery?.queryKey[1] === namespace ? previous : undefined;
}

/** The URL of a fresh browse of `namespace`: nothing of the last namespace's position carries over. */
export function namespaceSearch(namespace: string): URLSearchParams {
  return new URLSearchParams(namespace ? { namespace } : {});
}
