import { useCallback, useEffect, useSyncExternalStore } from "react";

/** How often relative times ("3m ago", "expires in 2h") move on. */
export const RELATIVE_TIME_TICK_MS = 15_000;

/**
 * One clock per interval, shared by every component that shows times relative to now: one timer however many
 * rows ask, and all of them move on together. A tab shown again catches up at once (browsers slow or stop the
 * timers of hidden tabs, which would leave "3m ago" standing until the next tick).
 */
interface Ticker {
  now: number;
  listeners: Set<() => void>;
  timer?: number;
}
const tickers = new Map<number, Ticker>();

function tick(t: Ticker) {
  t.now = Date.now();
  for (const listener of t.listeners) listener();
}

function tickerFor(intervalMs: number): Ticker {
  let t = tickers.get(intervalMs);
  if (!t) {
    t = { now: Date.now(), listeners: new Set() };
    tickers.set(intervalMs, t);
  }
  return t;
}

function onVisible() {
  if (document.visibilityState !== "visible") return;
  for (const t of tickers.values()) if (t.listeners.size > 0) tick(t);
}

function subscribe(intervalMs: number, listener: () => void): () => void {
  const t = tickerFor(intervalMs);
  if (t.listeners.size === 0) {
    t.now = Date.now(); // a clock nobody watched since: start from now, not from when it stopped
    t.timer = window.setInterval(() => tick(t), intervalMs);
    if (![...tickers.values()].some((other) => other !== t && other.listeners.size > 0)) {
      document.addEventListener("visibilitychange", onVisible);
    }
  }
  t.listeners.add(listener);
  return () => {
    t.listeners.delete(listener);
    if (t.listeners.size > 0) return;
    window.clearInterval(t.timer);
    t.timer = undefined;
    if (![...tickers.values()].some((other) => other.listeners.size > 0)) {
      document.removeEventListener("visibilitychange", onVisible);
    }
  };
}

/**
 * The current time, re-rendering every `intervalMs` (default: RELATIVE_TIME_TICK_MS) for texts relative to it;
 * components asking for the same interval share one clock.
 */
export function useNow(intervalMs: number = RELATIVE_TIME_TICK_MS): number {
  // A stable subscription: a new one on every render would restart the shared clock each time.
  const onTick = useCallback((listener: () => void) => subscribe(intervalMs, listener), [intervalMs]);
  const snapshot = useCallback(() => tickerFor(intervalMs).now, [intervalMs]);
  return useSyncExternalStore(onTick, snapshot);
}

/** Sets document.title to "<title> · Lifecycle Console". */
export function usePageTitle(title: string): void {
  useEffect(() => {
    const previous = document.title;
    document.title = title ? `${title} · Lifecycle Console` : "Lifecycle Console";
    return () => {
      document.title = previous;
    };
  }, [title]);
}
