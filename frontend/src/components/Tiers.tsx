// Tiered storage (issue 19, 26): where the stored bytes are. Local = segments with a file on the node's disk
// (the active ones included, and offloaded segments whose local copy is kept); remote only = segments whose
// only copy is in the object store. A segment is counted once, so local + remote only = stored. The server
// gives all three from one collection (the engine's ShardStats split); the UI only shows them, never adds.

import { formatBytes, formatCount } from "../lib/format";

export const TIER_HELP =
  "Local: stored bytes with a copy on the node's disk (offloaded segments whose local copy is kept included). " +
  "Remote only: stored bytes only in the object store (local copy dropped). Local + remote only = stored.";

/** A byte figure exactly, for a tooltip beside its rounded form: "1,234,567 bytes". */
export function exactBytes(bytes: number | null | undefined): string | undefined {
  return bytes == null ? undefined : `${formatCount(bytes)} bytes`;
}

/** "1.2 MiB local · 3.4 GiB remote only", or only the local bytes while nothing is remote only. */
export function tierText(local: number | null | undefined, remoteOnly: number | null | undefined): string {
  if (local == null && remoteOnly == null) return "—";
  if (!remoteOnly) return `${formatBytes(local ?? 0)} local`;
  return `${formatBytes(local ?? 0)} local · ${formatBytes(remoteOnly)} remote only`;
}

export function TierBytes({
  local,
  remoteOnly,
  testId,
}: {
  local: number | null | undefined;
  remoteOnly: number | null | undefined;
  testId?: string;
}) {
  return (
    <span title={TIER_HELP} data-testid={testId} data-local={local ?? ""} data-remote-only={remoteOnly ?? ""}>
      {tierText(local, remoteOnly)}
    </span>
  );
}
