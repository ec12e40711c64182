// Policy editor logic, kept free of React so it can be unit-tested: how a
// field's value is shown and edited in human units, how typed text becomes
// a wire value, and which changes (set / reset) a draft amounts to.

import type {
  PolicyChangeRequest,
  PolicyField,
  PolicySource,
  PolicyUnit,
  PolicyValue,
} from "../../api/types";
import {
  formatBytes,
  formatBytesExact,
  formatCount,
  formatDuration,
  formatDurationExact,
  formatPercent,
  isInfiniteWord,
  ParseError,
  parseDuration,
  parseRatio,
  parseSize,
  type ParseResult,
} from "../../lib/format";

export const SOURCE_LABELS: Record<PolicySource, string> = {
  builtin: "built-in",
  cluster: "cluster",
  namespace: "namespace",
  node: "node",
};

/** Display order of known groups; unknown groups follow in order of appearance. */
const GROUP_ORDER = ["expiry", "retention", "compaction", "subscriptions", "cleaning", "disk", "pacing"];

export const GROUP_LABELS: Record<string, string> = {
  expiry: "Expiry (TTL)",
  retention: "Retention",
  compaction: "Compaction",
  subscriptions: "Subscriptions and backlog",
  cleaning: "File cleaning",
  disk: "Disk watermarks",
  pacing: "Pacing",
};

/** Unit hint shown next to an input. */
export const UNIT_HINTS: Record<PolicyUnit, string> = {
  ms: "duration, e.g. 7d, 1h 30m, 90s",
  bytes: "size, e.g. 512 MiB, 10 GiB",
  ratio: "ratio, e.g. 75% or 0.75",
  count: "whole number",
  bool: "on / off",
  choice: "one of the listed choices",
  hours: "hours, e.g. 04 or 01-05 or 03;04",
};

type FieldShape = Pick<PolicyField, "unit" | "nullable" | "choices">;

/** Fields whose null is not "no limit": a local retention unset follows the total retention (tiered storage);
 * the expired-share roll of an active segment is off (only a wholly expired segment rolls). */
export const NULL_TEXTS: Record<string, string> = {
  local_retention_ms: "as retention_ms",
  local_retention_bytes: "as retention_bytes",
  offload_bandwidth_bytes_per_s: "unlimited",
  segment_expired_roll_ratio: "off",
};

/** Text for a null value of this field: no limit, for hours "not set", or what the field says (NULL_TEXTS). */
export function nullText(unit: PolicyUnit, name?: string): string {
  const own = name === undefined ? undefined : NULL_TEXTS[name];
  if (own !== undefined) return own;
  return unit === "hours" || unit === "choice" ? "not set" : "infinite";
}

/** Human-readable value: 604800000 ms → "7d", 536870912 bytes → "512 MiB", 0.75 → "75%". */
export function formatPolicyValue(field: Pick<PolicyField, "unit">, value: PolicyValue | undefined, name?: string): string {
  if (value === undefined) return "—";
  if (value === null) return nullText(field.unit, name);
  switch (field.unit) {
    case "ms":
      return typeof value === "number" ? formatDuration(value, { maxParts: 3 }) : String(value);
    case "bytes":
      return typeof value === "number" ? formatBytes(value, { decimals: 2 }) : String(value);
    case "ratio":
      return typeof value === "number" ? formatPercent(value, 2) : String(value);
    case "count":
      return typeof value === "number" ? formatCount(value) : String(value);
    case "bool":
      return value === true ? "on" : value === false ? "off" : String(value);
    default:
      return String(value);
  }
}

/**
 * Lossless text to edit a non-null value: parsePolicyText(unit, toEditText(unit, v)) === v.
 * 5400000 ms → "1h 30m", 1536 bytes → "1536 B", 0.755 → "75.5%".
 */
export function toEditText(unit: PolicyUnit, value: PolicyValue): string {
  if (value === null) return "";
  if (typeof value === "number") {
    switch (unit) {
      case "ms":
        return Number.isSafeInteger(value) ? formatDurationExact(value) : `${value}ms`;
      case "bytes":
        return Number.isSafeInteger(value) ? formatBytesExact(value) : `${value} B`;
      case "ratio":
        return `${Number((value * 100).toPrecision(12))}%`;
      default:
        return String(value);
    }
  }
  return String(value);
}

/** What the editor holds per field while the user edits it. */
export interface FieldDraft {
  /** This layer sets the field (otherwise it inherits). */
  override: boolean;
  /** Typed text; for bool "true"/"false", for choice the chosen value. */
  text: string;
  /** Nullable fields only: no limit (null). */
  infinite: boolean;
}

/** The draft that shows a field as the server has it. */
export function initialDraft(field: PolicyField): FieldDraft {
  const infinite = field.value === null;
  let text: string;
  if (field.unit === "bool") text = field.value === true ? "true" : "false";
  else if (infinite) text = field.default === null ? "" : toEditText(field.unit, field.default);
  else text = toEditText(field.unit, field.value);
  return { override: field.overridden, text, infinite: field.nullable && infinite };
}

const ok = <T>(value: T): ParseResult<T> => ({ ok: true, value });
const fail = (error: string): ParseResult<never> => ({ ok: false, error });

function parseCount(text: string): number {
  const cleaned = text.replace(/[,_\s]/g, "");
  if (!/^\+?\d+$/.test(cleaned)) {
    if (/^-/.test(cleaned)) throw new ParseError("Enter zero or a positive whole number.", text);
    throw new ParseError(`'${text}' is not a whole number.`, text);
  }
  const n = Number(cleaned);
  if (!Number.isSafeInteger(n)) throw new ParseError("The number is too large.", text);
  return n;
}

/** Parse typed text for a field's unit into its wire value (base units). */
export function parsePolicyText(field: FieldShape, text: string): ParseResult<PolicyValue> {
  const trimmed = text.trim();
  const infiniteTyped = trimmed !== "" && isInfiniteWord(trimmed);
  if (infiniteTyped && field.unit !== "choice" && field.unit !== "bool") {
    return field.nullable ? ok(null) : fail("This field cannot be infinite; enter a value.");
  }
  try {
    switch (field.unit) {
      case "ms":
        return ok(parseDuration(trimmed));
      case "bytes":
        return ok(parseSize(trimmed));
      case "ratio":
        return ok(parseRatio(trimmed));
      case "count":
        if (!trimmed) return fail("Enter a whole number.");
        return ok(parseCount(trimmed));
      case "bool":
        if (trimmed === "true" || trimmed === "false") return ok(trimmed === "true");
        return fail("Choose on or off.");
      case "choice":
        if (field.choices.includes(trimmed)) return ok(trimmed);
        return fail(`Choose one of: ${field.choices.join(", ")}.`);
      case "hours":
        if (!trimmed) return fail("Enter hours, e.g. 04 or 01-05.");
        return ok(trimmed);
      default:
        return trimmed ? ok(trimmed) : fail("Enter a value.");
    }
  } catch (err) {
    if (err instanceof ParseError) return fail(err.message);
    throw err;
  }
}

/** The wire value a draft stands for (honours the infinite toggle). */
export function parseDraft(field: FieldShape, draft: FieldDraft): ParseResult<PolicyValue> {
  if (field.nullable && draft.infinite) return ok(null);
  return parsePolicyText(field, draft.text);
}

export function policyValuesEqual(a: PolicyValue | undefined, b: PolicyValue | undefined): boolean {
  if (typeof a === "number" && typeof b === "number") return Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(a));
  return a === b;
}

export interface PolicyChange {
  field: string;
  /** "set": this layer sets the value; "reset": the field inherits again. */
  kind: "set" | "reset";
  before: PolicyValue;
  beforeSource: PolicySource;
  /** The new value for "set"; undefined for "reset" (the inherited value, known to the server). */
  after: PolicyValue | undefined;
}

export interface PolicyDiff {
  /** Both parts always present (the API lets either be left out). */
  request: Required<PolicyChangeRequest>;
  changes: PolicyChange[];
  /** Fields whose typed text does not parse: field → message. */
  errors: Record<string, string>;
}

/**
 * Compare drafts with the server's view. A field with no draft is unchanged.
 * Turning the override off on an overridden field resets it; an override
 * whose value differs from the effective one (or pins an inherited value)
 * sets it. Unparseable drafts go to `errors` and are left out of the request.
 */
export function computePolicyDiff(
  fields: Record<string, PolicyField>,
  drafts: Record<string, FieldDraft | undefined>,
): PolicyDiff {
  const request: Required<PolicyChangeRequest> = { set: {}, reset: [] };
  const changes: PolicyChange[] = [];
  const errors: Record<string, string> = {};
  for (const [name, field] of Object.entries(fields)) {
    const draft = drafts[name];
    if (!draft) continue;
    if (!draft.override) {
      if (field.overridden) {
        request.reset.push(name);
        changes.push({ field: name, kind: "reset", before: field.value, beforeSource: field.source, after: undefined });
      }
      continue;
    }
    const parsed = parseDraft(field, draft);
    if (!parsed.ok) {
      errors[name] = parsed.error;
      continue;
    }
    if (!field.overridden || !policyValuesEqual(parsed.value, field.value)) {
      request.set[name] = parsed.value;
      changes.push({ field: name, kind: "set", before: field.value, beforeSource: field.source, after: parsed.value });
    }
  }
  return { request, changes, errors };
}

/** Fields grouped for display: known groups in a fixed order, fields by name within a group. */
export function groupPolicyFields(fields: Record<string, PolicyField>): [string, [string, PolicyField][]][] {
  const groups = new Map<string, [string, PolicyField][]>();
  for (const [name, field] of Object.entries(fields)) {
    const g = field.group || "other";
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g)!.push([name, field]);
  }
  const rank = (g: string) => {
    const i = GROUP_ORDER.indexOf(g);
    return i < 0 ? GROUP_ORDER.length : i;
  };
  return [...groups.entries()].sort((a, b) => rank(a[0]) - rank(b[0]));
}
