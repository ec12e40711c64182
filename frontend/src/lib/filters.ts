// Turning what people type into list filters (segments, audit) into API
// query parameters, with a message per field that does not parse.

import type { QueryValue } from "../api/client";
import { tryParseDuration, tryParseRatio, tryParseSize } from "./format";

export interface SegmentFilterForm {
  namespace: string;
  shard: string;
  state: string;
  /** Tiered storage: local, both or remote (empty: any). */
  tier: string;
  min_size: string;
  max_size: string;
  /** Duration: segments whose newest record is older than this. */
  older_than: string;
  /** Duration: segments whose newest record is newer than this. */
  newer_than: string;
  min_expired_ratio: string;
  ordering: string;
  page_size: string;
}

export const EMPTY_SEGMENT_FILTERS: SegmentFilterForm = {
  namespace: "",
  shard: "",
  state: "",
  tier: "",
  min_size: "",
  max_size: "",
  older_than: "",
  newer_than: "",
  min_expired_ratio: "",
  ordering: "-max_timestamp",
  page_size: "50",
};

export interface FilterResult {
  params: Record<string, QueryValue>;
  errors: Record<string, string>;
}

/**
 * Segment filters → /api/segments/ params. Sizes accept "512 MiB", ages
 * "7d" (turned into epoch ms relative to `now`), ratios "20%" or "0.2".
 */
export function segmentFilterParams(form: SegmentFilterForm, now: number): FilterResult {
  const params: Record<string, QueryValue> = {};
  const errors: Record<string, string> = {};
  const t = (s: string) => s.trim();

  if (t(form.namespace)) params.namespace = t(form.namespace);
  if (t(form.shard)) {
    if (/^\d+$/.test(t(form.shard))) params.shard = Number(t(form.shard));
    else errors.shard = "A shard is a whole number (0, 1, …).";
  }
  if (t(form.state)) params.state = t(form.state);
  if (t(form.tier)) params.tier = t(form.tier);
  for (const key of ["min_size", "max_size"] as const) {
    if (!t(form[key])) continue;
    const r = tryParseSize(form[key]);
    if (!r.ok) errors[key] = r.error;
    else if (r.value === null) errors[key] = "Use a finite size here.";
    else params[key] = r.value;
  }
  if (params.min_size !== undefined && params.max_size !== undefined && Number(params.min_size) > Number(params.max_size)) {
    errors.max_size = "The largest size must be at least the smallest.";
  }
  for (const key of ["older_than", "newer_than"] as const) {
    if (!t(form[key])) continue;
    const r = tryParseDuration(form[key]);
    if (!r.ok) errors[key] = r.error;
    else if (r.value === null) errors[key] = "Use a finite age, e.g. 7d.";
    else params[key] = now - r.value;
  }
  if (t(form.min_expired_ratio)) {
    const r = tryParseRatio(form.min_expired_ratio);
    if (!r.ok) errors.min_expired_ratio = r.error;
    else params.min_expired_ratio = r.value;
  }
  if (t(form.ordering)) params.ordering = t(form.ordering);
  if (t(form.page_size)) params.page_size = Number(t(form.page_size)) || 50;
  return { params, errors };
}

/** Read a form from URL search params (missing keys take the defaults). */
export function formFromSearch<F extends object>(search: URLSearchParams, defaults: F): F {
  const out = { ...defaults } as Record<string, string>;
  for (const key of Object.keys(defaults)) {
    const v = search.get(key);
    if (v !== null) out[key] = v;
  }
  return out as F;
}

/** A form as URL search params: only values that differ from the defaults. */
export function searchFromForm<F extends object>(form: F, defaults: F): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(form)) {
    if (String(value) !== String((defaults as Record<string, unknown>)[key])) out[key] = String(value);
  }
  return out;
}

/** `<input type="datetime-local">` value (browser zone) → ISO 8601 for the API; "" → undefined. */
export function localInputToIso(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
