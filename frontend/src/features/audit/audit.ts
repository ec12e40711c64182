// Audit helpers: the per-field before → after rows of an audit entry.

import type { AuditEntry } from "../../api/types";

export interface DiffRow {
  field: string;
  before: unknown;
  after: unknown;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Fields that differ between two objects (top level), sorted by name; absent = undefined. */
export function shallowDiff(before: unknown, after: unknown): DiffRow[] {
  const b = isPlainObject(before) ? before : {};
  const a = isPlainObject(after) ? after : {};
  const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])].sort();
  return keys.filter((k) => !sameJson(b[k], a[k])).map((k) => ({ field: k, before: b[k], after: a[k] }));
}

/** The entry's diff as rows: the server's `diff` when present, else computed from before/after. */
export function auditDiffRows(entry: Pick<AuditEntry, "diff" | "before" | "after">): DiffRow[] {
  if (entry.diff && Object.keys(entry.diff).length > 0) {
    return Object.entries(entry.diff)
      .map(([field, d]) => ({ field, before: d?.before, after: d?.after }))
      .sort((x, y) => x.field.localeCompare(y.field));
  }
  return shallowDiff(entry.before, entry.after);
}

/** A value in a diff cell: "(absent)", "null", strings as-is, others as compact JSON. */
export function formatAuditValue(v: unknown): string {
  if (v === undefined) return "(absent)";
  if (v === null) return "null";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}
