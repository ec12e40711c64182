import { formatDateTime, formatRelativeTime, toDate } from "../lib/format";

/** Absolute time in the browser zone with a relative hint; `never` when missing. */
export function TimeCell({ value, now, never = "—" }: { value: string | null | undefined; now: number; never?: string }) {
  if (!value || !toDate(value)) return <span className="muted">{never}</span>;
  return (
    <>
      <time dateTime={value}>{formatDateTime(value, { seconds: false })}</time>
      <div className="muted small">{formatRelativeTime(value, now)}</div>
    </>
  );
}
