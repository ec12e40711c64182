// Complete API objects for tests, typed by the generated schema: each builder fills every field the
// server sends (so a fixture is what the API answers) and `extra` overrides any of them.

import type {
  Namespace,
  NamespaceListRow,
  ShardSummary,
  StorageNode,
} from "../api/types";

const AT = "2024-05-01T12:00:00Z";

/** A namespace as its detail endpoint answers; one shard per placement entry, all on `node`. */
export const namespace = (name: string, extra: Partial<Namespace> = {}): Namespace => {
  const ns = {
    name,
    shards: 2,
    node: "node-1" as string | null,
    policy_overrides: {},
    sync_state: "synced" as const,
    sync_error: "",
    created_at: AT,
    updated_at: AT,
    ...extra,
  };
  const node = ns.node;
  return {
    placement: node === null ? [] : Array.from({ length: ns.shards }, (_, shard) => ({ shard, node })),
    ...ns,
  };
};

/** A row of the namespace list: the namespace with its usage (none unless given). */
export const namespaceRow = (name: string, extra: Partial<NamespaceListRow> = {}): NamespaceListRow => ({
  stored_bytes: 0,
  stored_records: 0,
  segment_count: 0,
  local_bytes: 0,
  remote_only_bytes: 0,
  expired_ratio: 0,
  last_scan_at: null,
  last_compaction_at: null,
  ...namespace(name, extra),
  ...extra,
});

/** A shard's figures in a namespace summary: empty, not collected yet, unless given. */
export const shardSummary = (shard: number, extra: Partial<ShardSummary> = {}): ShardSummary => ({
  shard,
  log_start_offset: 0,
  end_offset: 0,
  record_count: 0,
  live_count: 0,
  size_bytes: 0,
  segment_count: 0,
  expired_records: 0,
  expired_bytes: 0,
  expired_ratio: 0,
  expired_bytes_ratio: 0,
  backlog_messages: 0,
  backlog_live_messages: 0,
  backlog_bytes: 0,
  local_bytes: 0,
  remote_only_bytes: 0,
  updated_at: AT,
  collected_at: null,
  ...extra,
});

export const storageNode = (name: string, extra: Partial<StorageNode> = {}): StorageNode => ({
  name,
  url: `http://${name}:9000`,
  has_token: true,
  healthy: true,
  last_seen_at: AT,
  last_error: "",
  policy_overrides: {},
  policy_sync_state: "synced",
  policy_sync_error: "",
  policy_version: 1,
  policy_synced_at: AT,
  created_at: AT,
  ...extra,
});
