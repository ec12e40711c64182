// How a run says what it stands for and whom it changed (README "Task runs"): scheduled sweeps of one kind
// and target fold into one row per window, read as "42 sweeps, 10:00–10:59" with their counts summed, and
// every run names the namespaces it changed (a node-wide sweep too).

import { Link } from "react-router";
import type { TaskRun } from "../../api/types";
import { formatCount, toDate } from "../../lib/format";

type FoldFields = Pick<TaskRun, "sweeps" | "window_start" | "window_end">;

const MINUTE_MS = 60_000;

/**
 * A folded row's window as "10:00–10:59": from its start to the last minute in it (the end is exclusive), in
 * the browser's zone unless `timeZone` is given; a window that is not whole minutes shows seconds. null for a
 * run of its own.
 */
export function foldWindowText(run: FoldFields, timeZone?: string): string | null {
  const start = toDate(run.window_start);
  const end = toDate(run.window_end);
  if (!start || !end || end <= start) return null;
  const seconds = (end.getTime() - start.getTime()) % MINUTE_MS !== 0;
  const last = new Date(end.getTime() - (seconds ? 1000 : MINUTE_MS));
  const time = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hour: "2-digit",
    minute: "2-digit",
    second: seconds ? "2-digit" : undefined,
    hourCycle: "h23",
  });
  return `${time.format(start)}–${time.format(last)}`;
}

/** "42 sweeps, 10:00–10:59" for a folded row; null for a run of its own. */
export function foldText(run: FoldFields, timeZone?: string): string | null {
  const window = foldWindowText(run, timeZone);
  if (window === null) return null;
  return `${formatCount(run.sweeps)} ${run.sweeps === 1 ? "sweep" : "sweeps"}, ${window}`;
}

/** The line under a folded row's kind: how many sweeps, which window, and whether they all found nothing. */
export function FoldedSweeps({ run }: { run: Pick<TaskRun, "id" | "idle"> & FoldFields }) {
  const text = foldText(run);
  if (text === null) return null;
  return (
    <div
      className="muted small"
      data-testid={`run-folded-${run.id}`}
      title="Scheduled sweeps of this kind and target in this window, folded into one row: steps, counts and bytes are their sums"
    >
      {text}
      {run.idle ? " · nothing to do" : ""}
    </div>
  );
}

/**
 * The namespaces a run changed (records expired or removed, segments deleted, rewritten or moved, cursors
 * moved), each a link to its page. A run on one namespace that changed just it says nothing more.
 */
export function ChangedNamespaces({ run }: { run: Pick<TaskRun, "id" | "namespace" | "namespaces_changed"> }) {
  const names = run.namespaces_changed ?? [];
  if (names.length === 0 || (names.length === 1 && names[0] === run.namespace)) return null;
  return (
    <div className="small" data-testid={`run-changed-${run.id}`}>
      <span className="muted">changed </span>
      {names.map((name, i) => (
        <span key={name}>
          {i > 0 && ", "}
          <Link className="mono" to={`/namespaces/${encodeURIComponent(name)}`}>
            {name}
          </Link>
        </span>
      ))}
    </div>
  );
}

/** The run that did the work a "last …" time stands for (a node-wide sweep included), on Tasks. */
export function RunLink({ run, testId }: { run: number | null; testId: string }) {
  if (run === null) return null;
  return (
    <Link className="small" to={`/tasks?run=${run}`} data-testid={testId}>
      run #{run}
    </Link>
  );
}
