// The overview's charts. Loaded lazily (React.lazy) so ECharts is not in the
// entry chunk; the overview's cards render before it arrives.

import { useMemo } from "react";
import { isNotFound } from "../../api/client";
import { useMetricSeries } from "../../api/queries";
import type { MetricRange, MetricSeriesName, MetricsSummary } from "../../api/types";
import { formatDateTime } from "../../lib/format";
import { chartReadout, forecastText, formatMetric, type Readout, seriesOption, seriesSummary } from "./metrics";
import { EChart } from "../../components/EChart";
import { EmptyState, ErrorState, LoadingState } from "../../components/States";

const CHARTS: { series: MetricSeriesName; title: string; testId: string; help: string }[] = [
  {
    series: "expired_ratio",
    title: "Expired ratio",
    testId: "chart-expired-ratio",
    help: "Expired but not yet reclaimed, as a share of stored records.",
  },
  {
    series: "backlog_messages",
    title: "Subscription backlog",
    testId: "chart-backlog",
    help: "Unacknowledged messages: per namespace, summed over its subscriptions and shards.",
  },
  {
    series: "celery_queue_depth",
    title: "Task queues",
    testId: "chart-celery-queues",
    help: "Lifecycle tasks waiting in each Celery queue (one per node): growing means the workers fall behind.",
  },
  {
    series: "disk_used_ratio",
    title: "Disk used",
    testId: "chart-disk",
    help: "Per node, with the max-used, clean-forcibly and warning watermarks and the forecast.",
  },
  {
    series: "delete_queue_length",
    title: "Delete queue",
    testId: "chart-delete-queue",
    help: "Index clean-ups waiting on the read-path queue.",
  },
];

/**
 * ``summary`` is the Overview's own summary answer: the readout next to a chart that has a card (expired
 * ratio, backlog, disk) is that card's field, so a chart never shows a different "latest" than the card.
 */
export default function OverviewCharts({
  range,
  refetchInterval,
  summary,
}: {
  range: MetricRange;
  refetchInterval: number | false;
  summary?: MetricsSummary;
}) {
  return (
    <div className="chart-grid">
      {CHARTS.map((c) => (
        <MetricChart key={c.series} {...c} range={range} refetchInterval={refetchInterval} summary={summary} />
      ))}
    </div>
  );
}

function readoutTitle(readout: Readout, summary: MetricsSummary | undefined): string {
  if (readout.source === "summary") {
    const at = summary?.collected_at ? ` of ${formatDateTime(summary.collected_at)}` : "";
    return `From the latest metrics collection${at}: the same figure as the card above. The chart's lines end at their latest samples.`;
  }
  return `The latest sample${readout.at !== null ? `, at ${formatDateTime(readout.at)}` : ""}: the chart's last point.`;
}

function MetricChart({
  series,
  title,
  testId,
  help,
  range,
  refetchInterval,
  summary,
}: {
  series: MetricSeriesName;
  title: string;
  testId: string;
  help: string;
  range: MetricRange;
  refetchInterval: number | false;
  summary?: MetricsSummary;
}) {
  const q = useMetricSeries(series, range, { refetchInterval });
  // Every chart spans the selected range up to when its data came, whatever its points cover.
  const fetchedAt = q.dataUpdatedAt;
  const option = useMemo(
    () => (q.data ? seriesOption(q.data, title, range, fetchedAt || Date.now()) : null),
    [q.data, title, range, fetchedAt],
  );
  const empty = q.data && q.data.lines.every((l) => l.points.length === 0);
  const latest = q.data ? chartReadout(series, q.data, summary, title) : null;
  const forecast = q.data ? forecastText(q.data, q.dataUpdatedAt || Date.now()) : null;
  return (
    <section className="card" aria-labelledby={`${testId}-title`} data-testid={testId}>
      <div className="card-head">
        <h2 id={`${testId}-title`}>{title}</h2>
        <span className="chart-head-side">
          {q.isFetching && <span className="muted small">updating… </span>}
          {latest && q.data && (
            <span className="small" data-testid={`chart-latest-${series}`} data-source={latest.source} title={readoutTitle(latest, summary)}>
              latest <strong>{formatMetric(latest.value, q.data.unit)}</strong>
              {latest.of !== null && <span className="muted"> (highest: {latest.of})</span>}
              {latest.highest && (
                <span className="muted">
                  {" "}
                  (highest: {latest.highest.line} {formatMetric(latest.highest.value, q.data.unit)})
                </span>
              )}
            </span>
          )}
        </span>
      </div>
      <p className="muted small">{help}</p>
      {q.isPending && <LoadingState label={`Loading ${title.toLowerCase()}…`} />}
      {q.isError && !q.data && (isNotFound(q.error) ? (
        <EmptyState title="Not available yet">This server does not offer metric series yet.</EmptyState>
      ) : (
        <ErrorState title={`Could not load ${title.toLowerCase()}`} error={q.error} onRetry={() => void q.refetch()} />
      ))}
      {q.data && empty && <EmptyState title="No data in this range">Pick a longer range, or wait for the next scrape.</EmptyState>}
      {q.data && !empty && option && (
        <>
          <EChart option={option} height={240} ariaLabel={seriesSummary(q.data, title)} />
          {forecast && (
            <p className="small muted" data-testid={`chart-forecast-${series}`}>
              {forecast}
            </p>
          )}
          <p className="visually-hidden">{seriesSummary(q.data, title)}</p>
        </>
      )}
    </section>
  );
}
