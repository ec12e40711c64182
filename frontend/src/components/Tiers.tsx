// Tiered storage (issue 19): where the bytes are. Local = segments with a copy on the node's disk (the
// active ones included), remote = segments in the object store; a segment offloaded with its local copy
// kept counts in both, so local + remote can exceed what is stored. The server computes both (the catalog's
// one definition); the UI only shows them.

import { formatBytes } from "../lib/format";

export const TIER_HELP =
  "Local: bytes of segments with a copy on the node's disk. Remote: bytes of segments in the object store " +
  "(offloaded). A segment offloaded whose local copy is kept counts in both.";

/** "1.2 MiB local · 3.4 GiB remote", or only the local bytes while nothing is remote. */
export function tierText(local: number | null | undefined, remote: number | null | undefined): string {
  if (local == null && remote == null) return "—";
  if (!remote) return `${formatBytes(local ?? 0)} local`;
  return `${formatBytes(local ?? 0)} local · ${formatBytes(remote)} remote`;
}

export function TierBytes({ local, remote, testId }: { local: number | null | undefined; remote: number | null | undefined; testId?: string }) {
  return (
    <span title={TIER_HELP} data-testid={testId} data-local={local ?? ""} data-remote={remote ?? ""}>
      {tierText(local, remote)}
    </span>
  );
}
