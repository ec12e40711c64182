// Loading / error / empty states. Each one tells the user what is happening
// and what to do next; no page ever renders blank.

import type { ReactNode } from "react";
import { ApiError, errorMessage } from "../api/client";

export function LoadingState({ label = "Loading…" }: { label?: string }) {
  return (
    <div className="state state-loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      <span>{label}</span>
    </div>
  );
}

function hintFor(error: unknown): string | null {
  if (!(error instanceof ApiError)) return "Reload the page; if it keeps happening, check the browser console.";
  if (error.isNetworkError) return "Check that the backend is running and reachable, then retry.";
  if (error.isUnauthenticated) return "Your session may have expired: log in again, or ask an admin for access.";
  if (error.status >= 500) return "The server failed; check the backend logs, then retry.";
  return null;
}

export function ErrorState({
  title = "Could not load data",
  error,
  onRetry,
  retrying = false,
}: {
  title?: string;
  error: unknown;
  onRetry?: () => void;
  retrying?: boolean;
}) {
  const hint = hintFor(error);
  return (
    <div className="state state-error" role="alert">
      <strong>{title}</strong>
      <p className="state-message">{errorMessage(error)}</p>
      {hint && <p className="muted">{hint}</p>}
      {onRetry && (
        <button type="button" className="button" onClick={onRetry} disabled={retrying}>
          {retrying ? "Retrying…" : "Retry"}
        </button>
      )}
    </div>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="state state-empty">
      <strong>{title}</strong>
      {children && <div className="muted">{children}</div>}
    </div>
  );
}

/** Small inline status pill. Text is always present, colour is only a cue. */
export function Badge({
  tone,
  children,
  testId,
}: {
  tone: "ok" | "fail" | "warn" | "neutral";
  children: ReactNode;
  testId?: string;
}) {
  return (
    <span className={`badge badge-${tone}`} data-testid={testId}>
      {children}
    </span>
  );
}

/**
 * For endpoints the backend is still adding: a 404 means "this server does
 * not offer it yet", not an error the user can fix.
 */
export function NotAvailableState({ feature, testId }: { feature: string; testId?: string }) {
  return (
    <div className="state state-empty" data-testid={testId ?? "not-available"}>
      <strong>{feature} is not available yet</strong>
      <div className="muted">
        This server does not offer it yet (the API answered 404). It appears here once the backend is
        updated; nothing to do on your side.
      </div>
    </div>
  );
}

/** Progress bar with its percentage as text (0–1 input). */
export function ProgressBar({ value, label, testId }: { value: number; label: string; testId?: string }) {
  const pct = Math.max(0, Math.min(1, Number.isFinite(value) ? value : 0)) * 100;
  return (
    <div className="progress" data-testid={testId}>
      <div
        className="progress-track"
        role="progressbar"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(pct)}
      >
        <div className="progress-fill" style={{ width: `${pct}%` }} />
      </div>
      <span className="progress-text">{Math.round(pct)}%</span>
    </div>
  );
}
