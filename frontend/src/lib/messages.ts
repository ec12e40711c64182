// Message browser: URL search params ⇄ a browse query.

import type { MessageQuery } from "../api/types";

export type BrowseMode = "offset" | "time" | "key" | "tag";

/** The browse query described by URL params, or null with the reason when incomplete. */
export function messageQueryFromSearch(search: URLSearchParams): { query: MessageQuery | null; problem?: string } {
  const shardText = search.get("shard");
  if (!search.get("namespace")) return { query: null, problem: "Choose a namespace." };
  if (shardText === null || !/^\d+$/.test(shardText)) return { query: null, problem: "Choose a shard." };
  const q: MessageQuery = { shard: Number(shardText) };
  const num = (k: string) => {
    const v = search.get(k);
    return v !== null && /^\d+$/.test(v) ? Number(v) : undefined;
  };
  const offset = num("offset");
  const time = num("time");
  const key = search.get("key");
  const tag = search.get("tag");
  if (key) q.key = key;
  else if (tag) q.tag = tag;
  if (offset !== undefined) q.offset = offset;
  else if (time !== undefined && !q.key && !q.tag) q.time = time;
  const limit = num("limit");
  q.limit = limit !== undefined ? Math.min(200, Math.max(1, limit)) : 50;
  q.display = search.get("display") === "hex" ? "hex" : "text";
  return { query: q };
}

/** Search params for the page after this one: same query, starting at `nextOffset`. */
export function nextPageSearch(search: URLSearchParams, nextOffset: number): URLSearchParams {
  const next = new URLSearchParams(search);
  next.delete("time");
  next.set("offset", String(nextOffset));
  return next;
}
