// A node's health as the server's last metrics collection found it (GET /api/metrics/summary
// `nodes[].health`): the one definition shown on Overview, Nodes and behind /api/health.

import type { NodeDisk, NodeHealthState } from "../../api/types";
import { formatDateTime } from "../../lib/format";
import { Badge } from "../../components/States";

const HEALTH_TEXT: Record<NodeHealthState, string> = {
  healthy: "✓ healthy",
  unhealthy: "✕ unhealthy",
  unknown: "? not checked yet",
};

const HEALTH_TONE: Record<NodeHealthState, "ok" | "fail" | "neutral"> = {
  healthy: "ok",
  unhealthy: "fail",
  unknown: "neutral",
};

/** The health state of a node entry (an older server without it: unknown, never "unhealthy"). */
export function nodeHealthOf(node: Pick<NodeDisk, "health"> | undefined): NodeHealthState {
  return node?.health ?? "unknown";
}

export function NodeHealthBadge({ node, testId }: { node: Pick<NodeDisk, "health" | "checked_at"> | undefined; testId?: string }) {
  const state = nodeHealthOf(node);
  const checked = node?.checked_at ? `checked ${formatDateTime(node.checked_at)}` : "no metrics collection has looked at it recently";
  return (
    <Badge tone={HEALTH_TONE[state]} testId={testId}>
      <span data-health={state} title={checked}>
        {HEALTH_TEXT[state]}
      </span>
    </Badge>
  );
}
