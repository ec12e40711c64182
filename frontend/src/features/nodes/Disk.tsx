import type { NodeDisk } from "../../api/types";
import { formatBytes, formatDateTime, formatDuration, formatPercent } from "../../lib/format";
import { DISK_LEVEL_TEXT, DISK_LEVEL_TONE, diskLevel, markLabelLayout } from "../overview/metrics";
import { Badge } from "../../components/States";

const LABEL_ROW_PX = 14;
const LABEL_SHIFT = { start: "none", center: "translateX(-50%)", end: "translateX(-100%)" } as const;

/** Disk use of one node as a bar with its three watermarks marked, plus text. */
export function DiskBar({ disk, compact, minHistoryS }: { disk: NodeDisk; compact?: boolean; minHistoryS?: number }) {
  if (disk.disk_used_ratio === null || disk.disk_used_ratio === undefined) {
    return (
      <div className="disk" data-testid={`disk-${disk.name}`} data-level="unknown">
        <p className="muted small">No disk figures yet: the node has not reported its disk use.</p>
      </div>
    );
  }
  const level = diskLevel(disk.disk_used_ratio, disk.watermarks);
  const tone = DISK_LEVEL_TONE[level];
  const pct = Math.max(0, Math.min(1, disk.disk_used_ratio)) * 100;
  const marks: [string, number][] = [
    ["max used", disk.watermarks.max_used],
    ["forcibly", disk.watermarks.clean_forcibly],
    ["warning", disk.watermarks.warning],
  ];
  // Close watermarks (0.75 / 0.85 / 0.90) put their labels on separate rows.
  const layout = markLabelLayout(marks.map(([, r]) => r));
  const lanes = compact ? 0 : Math.max(...layout.map((l) => l.lane)) + 1;
  return (
    <div className="disk" data-testid={`disk-${disk.name}`} data-level={level}>
      <div className="card-head">
        <span>
          <strong>{formatPercent(disk.disk_used_ratio)}</strong>{" "}
          <span className="muted small">
            {formatBytes(disk.disk_used_bytes)} of {formatBytes(disk.disk_capacity_bytes)}
          </span>
        </span>
        <Badge tone={tone}>{level === "ok" ? "ok" : level.replace("_", " ")}</Badge>
      </div>
      <div
        className="disk-bar"
        role="meter"
        aria-label={`Disk used on ${disk.name}`}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(pct)}
        aria-valuetext={`${formatPercent(disk.disk_used_ratio)}, ${DISK_LEVEL_TEXT[level]}`}
        style={lanes > 1 ? { marginBottom: 18 + (lanes - 1) * LABEL_ROW_PX } : undefined}
      >
        <div className={`disk-fill tone-${tone}`} style={{ width: `${pct}%` }} />
        {!compact &&
          marks.map(([label, r], i) => (
            <div key={label} className="disk-mark" style={{ left: `${r * 100}%` }} title={`${label} ${formatPercent(r)}`}>
              <span
                style={{ top: 18 + layout[i]!.lane * LABEL_ROW_PX, transform: LABEL_SHIFT[layout[i]!.align] }}
                data-lane={layout[i]!.lane}
              >
                {label} {formatPercent(r, 0)}
              </span>
            </div>
          ))}
      </div>
      <p className="small muted">{DISK_LEVEL_TEXT[level]}.</p>
      {disk.forecast_warning_at && level !== "warning" && (
        <p className="small warn-text" data-testid={`disk-forecast-${disk.name}`}>
          Forecast to reach the warning watermark at {formatDateTime(disk.forecast_warning_at, { seconds: false })}.
        </p>
      )}
      {disk.forecast_ready === false && !compact && (
        <p className="small muted" data-testid={`disk-forecast-pending-${disk.name}`}>
          No forecast yet: {minHistoryS ? `it needs ${formatDuration(minHistoryS * 1000)} of disk history` : "not enough disk history"}
          {disk.forecast_history_s !== undefined ? ` (${formatDuration(disk.forecast_history_s * 1000)} so far)` : ""}.
        </p>
      )}
    </div>
  );
}
