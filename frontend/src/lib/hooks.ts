import { useEffect, useState } from "react";

/** Current time, re-rendering every `intervalMs` (for "5s ago" texts). */
export function useNow(intervalMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const id = window.setInterval(() => setNow(Date.now()), intervalMs);
    return () => window.clearInterval(id);
  }, [intervalMs]);
  return now;
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
