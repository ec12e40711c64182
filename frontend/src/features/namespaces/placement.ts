import type { Namespace } from "../../api/types";

/** The nodes hosting a namespace's shards, each named once, in shard order. */
export function placedOn(n: Pick<Namespace, "node" | "placement">): string {
  const nodes = [...new Set((n.placement ?? []).map((p) => p.node))];
  return nodes.length ? nodes.join(", ") : (n.node ?? "no node");
}

/** Spread value of the create form's node picker: shards dealt round-robin over every node. */
export const SPREAD = "*spread*";

/** One node per shard, dealt round-robin over ``nodes`` (in the order given). */
export function spreadPlacement(nodes: string[], shards: number): string[] {
  if (nodes.length === 0) return [];
  return Array.from({ length: shards }, (_, shard) => nodes[shard % nodes.length] as string);
}
