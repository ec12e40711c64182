// Segment catalog: one cursor page at a time (the catalog can hold millions
// of rows, so the UI never walks all pages).

import { useState } from "react";
import { errorMessage, withQuery, type QueryValue } from "../../api/client";
import { FIGURES_REFRESH_MS, useCursorPage } from "../../api/queries";
import type { Segment, SegmentState, SegmentTier } from "../../api/types";
import { formatBytes, formatCount, formatDateTime, formatPercent, formatRelativeTime } from "../../lib/format";
import { useNow } from "../../lib/hooks";
import { CursorPager } from "../../components/CursorPager";
import { Badge, EmptyState, ErrorState, LoadingState } from "../../components/States";

const STATE_TONE: Record<SegmentState, "ok" | "warn" | "fail" | "neutral"> = {
  active: "ok",
  sealed: "neutral",
  deleting: "warn",
  deleted: "fail",
  offloaded: "neutral",
};

/** The tiers of tiered storage, as the filter offers them (the API's SegmentTierEnum, in order). */
export const SEGMENT_TIERS: [SegmentTier, string][] = [
  ["local", "local only"],
  ["both", "local and remote"],
  ["remote", "remote only"],
];

const TIER_TEXT: Record<SegmentTier, { text: string; title: string }> = {
  local: { text: "local", title: "Only on the node's disk" },
  both: { text: "local + remote", title: "On the node's disk and in the object store (offloaded, local copy kept)" },
  remote: { text: "remote", title: "Only in the object store (the local copy went past local retention); reads fetch it" },
};

export function SegmentsList({ filters, emptyHint }: { filters: Record<string, QueryValue>; emptyHint?: string }) {
  const firstUrl = withQuery("/api/segments/", filters);
  const [cursor, setCursor] = useState<{ base: string; url: string } | null>(null);
  const url = cursor && cursor.base === firstUrl ? cursor.url : firstUrl;
  // The catalog follows the nodes every metrics interval (changed shards first); so does the table.
  const page = useCursorPage<Segment>("segments", url, { refetchInterval: FIGURES_REFRESH_MS });

  if (page.isPending) return <LoadingState label="Loading segments…" />;
  if (page.isError && !page.data) {
    return (
      <ErrorState title="Could not load segments" error={page.error} onRetry={() => void page.refetch()} retrying={page.isFetching} />
    );
  }
  return (
    <div>
      {page.isError && (
        <div className="banner banner-warn" role="alert">
          Could not load that page: {errorMessage(page.error)}
        </div>
      )}
      {page.data.results.length === 0 ? (
        <EmptyState title="No segments match">{emptyHint ?? "Widen the filters (state, tier, size, age) or sync the namespace."}</EmptyState>
      ) : (
        <SegmentsTable segments={page.data.results} />
      )}
      <CursorPager
        page={page.data}
        onPage={(u) => setCursor({ base: firstUrl, url: u })}
        onFirst={() => setCursor(null)}
        atFirst={url === firstUrl}
        isFetching={page.isFetching}
        label="Segment pages"
      />
    </div>
  );
}

function MsTime({ value, now }: { value: number | null; now: number }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return (
    <>
      <time dateTime={new Date(value).toISOString()}>{formatDateTime(value, { seconds: false })}</time>
      <div className="muted small">{formatRelativeTime(value, now)}</div>
    </>
  );
}

export function SegmentsTable({ segments }: { segments: Segment[] }) {
  const now = useNow(30_000);
  return (
    <div className="table-wrap">
      <table className="table table-compact" data-testid="segments-table">
        <thead>
          <tr>
            <th scope="col">Segment</th>
            <th scope="col">Offsets</th>
            <th scope="col">State</th>
            <th scope="col">Tier</th>
            <th scope="col" className="num">
              Size
            </th>
            <th scope="col" className="num">
              Records (live)
            </th>
            <th scope="col" className="num">
              Expired
            </th>
            <th scope="col">Newest record</th>
            <th scope="col">Expires by</th>
          </tr>
        </thead>
        <tbody>
          {segments.map((s) => (
            <tr key={s.id} data-testid={`segment-row-${s.id}`}>
              <th scope="row">
                <span className="mono">{s.namespace}</span>
                <div className="muted small">shard {s.shard} · #{s.id}</div>
              </th>
              <td className="mono small" data-testid={`segment-offsets-${s.id}`}>
                {formatCount(s.base_offset)} – {formatCount(s.last_offset)}
              </td>
              <td>
                <Badge tone={STATE_TONE[s.state] ?? "neutral"} testId={`segment-state-${s.id}`}>
                  {s.state}
                </Badge>
              </td>
              <td>
                <Badge tone={s.tier === "local" ? "neutral" : "ok"} testId={`segment-tier-${s.id}`}>
                  <span title={TIER_TEXT[s.tier]?.title}>{TIER_TEXT[s.tier]?.text ?? s.tier}</span>
                </Badge>
              </td>
              <td className="num" data-testid={`segment-size-${s.id}`}>
                {formatBytes(s.size_bytes)}
              </td>
              <td className="num" data-testid={`segment-records-${s.id}`}>
                {formatCount(s.record_count)} <span className="muted small">({formatCount(s.live_count)})</span>
              </td>
              <td className="num" data-testid={`segment-expired-${s.id}`}>
                {formatPercent(s.expired_ratio)}
              </td>
              <td>
                <MsTime value={s.max_timestamp} now={now} />
              </td>
              <td>
                {s.deadline === null ? <span className="muted">some never expire</span> : <MsTime value={s.deadline} now={now} />}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
