// Client-side sorting for small lists (namespaces, nodes): stable, with
// missing values (null/undefined/NaN) always last whatever the direction.

export type SortDir = "asc" | "desc";

export interface SortState<K extends string> {
  key: K;
  dir: SortDir;
}

function isMissing(v: unknown): boolean {
  return v === null || v === undefined || v === "" || (typeof v === "number" && Number.isNaN(v));
}

/** Compare two cell values: numbers numerically, ISO dates as time, strings naturally. */
export function compareValues(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  const sa = String(a);
  const sb = String(b);
  const iso = /^\d{4}-\d{2}-\d{2}T/;
  if (iso.test(sa) && iso.test(sb)) return Date.parse(sa) - Date.parse(sb);
  return sa.localeCompare(sb, "en", { numeric: true });
}

export function sortRows<T, K extends string>(rows: readonly T[], sort: SortState<K>, get: (row: T, key: K) => unknown): T[] {
  const sign = sort.dir === "asc" ? 1 : -1;
  return rows
    .map((row, i) => ({ row, i, v: get(row, sort.key) }))
    .sort((x, y) => {
      const mx = isMissing(x.v);
      const my = isMissing(y.v);
      if (mx || my) return mx === my ? x.i - y.i : mx ? 1 : -1;
      return sign * compareValues(x.v, y.v) || x.i - y.i;
    })
    .map((x) => x.row);
}

/** Clicking a header: same key flips the direction, a new key starts with `firstDir`. */
export function nextSort<K extends string>(current: SortState<K>, key: K, firstDir: SortDir = "asc"): SortState<K> {
  if (current.key === key) return { key, dir: current.dir === "asc" ? "desc" : "asc" };
  return { key, dir: firstDir };
}
