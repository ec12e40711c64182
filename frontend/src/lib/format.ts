// Formatting and parsing of the units operators see: bytes (binary units),
// durations, times in the browser's zone, ratios. The parsers accept what a
// person types into a policy form and return base units (bytes, ms), with
// "infinite" meaning null (no limit).

export const EMPTY = "—";

// ---------------------------------------------------------------------------
// Errors

/** Thrown by the parse* functions; `message` is ready to show next to a field. */
export class ParseError extends Error {
  readonly input: string;
  constructor(message: string, input: string) {
    super(message);
    this.name = "ParseError";
    this.input = input;
  }
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

function attempt<T>(fn: () => T): ParseResult<T> {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    if (err instanceof ParseError) return { ok: false, error: err.message };
    throw err;
  }
}

const INFINITE_WORDS = new Set(["infinite", "infinity", "inf", "unlimited", "never", "∞"]);

/** Whether the text means "no limit" (case-insensitive). */
export function isInfiniteWord(input: string): boolean {
  return INFINITE_WORDS.has(input.trim().toLowerCase());
}

function trimZeros(s: string): string {
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

function isFiniteNumber(n: unknown): n is number {
  return typeof n === "number" && Number.isFinite(n);
}

// ---------------------------------------------------------------------------
// Bytes (binary units)

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"] as const;

/**
 * Human size with binary units: 536870912 → "512 MiB", 1536 → "1.5 KiB".
 * `decimals` is the maximum number of fraction digits (trailing zeros dropped).
 * null/undefined/NaN → "—".
 */
export function formatBytes(
  bytes: number | null | undefined,
  opts: { decimals?: number; infinite?: string } = {},
): string {
  if (bytes === null && opts.infinite !== undefined) return opts.infinite;
  if (!isFiniteNumber(bytes)) return EMPTY;
  const decimals = Math.max(0, opts.decimals ?? 1);
  const sign = bytes < 0 ? "-" : "";
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  let text = value.toFixed(unit === 0 ? 0 : decimals);
  // Rounding may reach 1024 (e.g. 1048575 B → "1024.0 KiB"): promote.
  if (Number(text) >= 1024 && unit < BYTE_UNITS.length - 1) {
    unit += 1;
    text = (Number(text) / 1024).toFixed(decimals);
  }
  return `${sign}${trimZeros(text)} ${BYTE_UNITS[unit]}`;
}

/**
 * Lossless size for editing: the largest binary unit that divides the value
 * evenly, so parseSize(formatBytesExact(n)) === n. 536870912 → "512 MiB",
 * 1536 → "1536 B" (not "1.5 KiB"), null → "infinite".
 */
export function formatBytesExact(bytes: number | null): string {
  if (bytes === null) return "infinite";
  if (!Number.isSafeInteger(bytes)) throw new RangeError(`not a whole number of bytes: ${bytes}`);
  if (bytes === 0) return "0 B";
  const sign = bytes < 0 ? "-" : "";
  let value = Math.abs(bytes);
  let unit = 0;
  while (value % 1024 === 0 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${sign}${value} ${BYTE_UNITS[unit]}`;
}

const SIZE_MULTIPLIERS: Record<string, number> = {
  "": 1,
  b: 1,
  byte: 1,
  bytes: 1,
  // Binary (IEC) units; the bare letters follow JVM/RocketMQ habit (512m = 512 MiB).
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  p: 1024 ** 5,
  pib: 1024 ** 5,
  // Decimal (SI) units, as the SI defines them.
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
  tb: 1000 ** 4,
  pb: 1000 ** 5,
};

const SIZE_RE = /^([+-]?)(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)$/i;

/**
 * Parse a size into bytes: "512MiB", "1.5 GiB", "100 KB" (SI, 100000),
 * "512m" (binary), "4096" (bytes). "infinite" → null.
 * Throws ParseError for empty, negative, unknown-unit or malformed input.
 * Fractions are rounded to the nearest byte.
 */
export function parseSize(input: string): number | null {
  const text = String(input ?? "").trim();
  if (!text) throw new ParseError("Enter a size, e.g. 512 MiB, or 'infinite'.", input);
  if (isInfiniteWord(text)) return null;
  const m = SIZE_RE.exec(text);
  if (!m) throw new ParseError(`'${text}' is not a size; use e.g. 512 MiB, 10 GiB or 'infinite'.`, input);
  const [, sign, num = "", unitRaw = ""] = m;
  const unit = unitRaw.toLowerCase();
  const mult = SIZE_MULTIPLIERS[unit];
  if (mult === undefined) {
    throw new ParseError(`Unknown size unit '${unitRaw}'; use B, KiB, MiB, GiB, TiB or PiB.`, input);
  }
  const n = Number(num);
  if (sign === "-" && n !== 0) throw new ParseError("A size cannot be negative; use 'infinite' for no limit.", input);
  const bytes = Math.round(n * mult);
  if (n > 0 && bytes === 0) throw new ParseError("Size is smaller than one byte.", input);
  if (!Number.isSafeInteger(bytes)) throw new ParseError("Size is too large.", input);
  return bytes;
}

export const tryParseSize = (input: string): ParseResult<number | null> => attempt(() => parseSize(input));

// ---------------------------------------------------------------------------
// Durations

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;

export const MS = { second: SECOND, minute: MINUTE, hour: HOUR, day: DAY, week: WEEK } as const;

const DURATION_PARTS: ReadonlyArray<readonly [string, number]> = [
  ["d", DAY],
  ["h", HOUR],
  ["m", MINUTE],
  ["s", SECOND],
  ["ms", 1],
];

/**
 * Compact duration from milliseconds: 604800000 → "7d", 5400000 → "1h 30m",
 * 250 → "250ms". Shows at most `maxParts` units (default 2), rounding the
 * smallest one shown (1h 29m 59s → "1h 30m"). null → "—" (or `infinite`).
 */
export function formatDuration(
  ms: number | null | undefined,
  opts: { maxParts?: number; infinite?: string } = {},
): string {
  if (ms === null && opts.infinite !== undefined) return opts.infinite;
  if (!isFiniteNumber(ms)) return EMPTY;
  const maxParts = Math.max(1, opts.maxParts ?? 2);
  const sign = ms < 0 ? "-" : "";
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return "0s";

  // The largest unit present plus maxParts decides the smallest unit shown;
  // round to it (a carry may promote to a larger unit: 23h 59m 59s → "1d").
  let first = DURATION_PARTS.findIndex(([, size]) => rest >= size);
  let last = Math.min(first + maxParts - 1, DURATION_PARTS.length - 1);
  const smallest = DURATION_PARTS[last]![1];
  rest = Math.round(rest / smallest) * smallest;
  first = DURATION_PARTS.findIndex(([, size]) => rest >= size);
  last = Math.min(last, first + maxParts - 1);

  const parts: string[] = [];
  for (let i = first; i <= last; i++) {
    const [label, size] = DURATION_PARTS[i]!;
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0) parts.push(`${count}${label}`);
  }
  return sign + parts.join(" ");
}

/**
 * Lossless duration for editing: every non-zero unit down to ms, so
 * parseDuration(formatDurationExact(n)) === n. null → "infinite".
 */
export function formatDurationExact(ms: number | null): string {
  if (ms === null) return "infinite";
  if (!Number.isSafeInteger(ms)) throw new RangeError(`not a whole number of milliseconds: ${ms}`);
  return formatDuration(ms, { maxParts: DURATION_PARTS.length });
}

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  msec: 1,
  millisecond: 1,
  milliseconds: 1,
  s: SECOND,
  sec: SECOND,
  secs: SECOND,
  second: SECOND,
  seconds: SECOND,
  m: MINUTE,
  min: MINUTE,
  mins: MINUTE,
  minute: MINUTE,
  minutes: MINUTE,
  h: HOUR,
  hr: HOUR,
  hrs: HOUR,
  hour: HOUR,
  hours: HOUR,
  d: DAY,
  day: DAY,
  days: DAY,
  w: WEEK,
  week: WEEK,
  weeks: WEEK,
};

const DURATION_TOKEN_RE = /(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)/iy;

/**
 * Parse a duration into milliseconds: "7d", "1h 30m", "1h30m", "1.5h",
 * "90s", "250ms", "2 weeks", "0". "infinite" → null.
 * Throws ParseError for empty, negative, unit-less (other than 0), repeated
 * units, unknown units or malformed input. Fractions round to the nearest ms.
 */
export function parseDuration(input: string): number | null {
  const text = String(input ?? "").trim();
  if (!text) throw new ParseError("Enter a duration, e.g. 7d or 1h 30m, or 'infinite'.", input);
  if (isInfiniteWord(text)) return null;
  if (text.startsWith("-")) {
    throw new ParseError("A duration cannot be negative; use 'infinite' for no limit.", input);
  }
  const body = text.startsWith("+") ? text.slice(1).trim() : text;
  if (/^0+(\.0+)?$/.test(body)) return 0;
  if (/^\d+(\.\d+)?$/.test(body)) {
    throw new ParseError(`Add a unit to '${body}': ms, s, m, h, d or w (e.g. ${body}s).`, input);
  }

  let total = 0;
  let any = false;
  const seen = new Set<number>();
  let pos = 0;
  while (pos < body.length) {
    // Skip separators between tokens: spaces and commas ("1h, 30m").
    const sep = /^[\s,]+/.exec(body.slice(pos));
    if (sep) {
      pos += sep[0].length;
      continue;
    }
    DURATION_TOKEN_RE.lastIndex = pos;
    const m = DURATION_TOKEN_RE.exec(body);
    if (!m) {
      throw new ParseError(`'${text}' is not a duration; use e.g. 7d, 1h 30m, 90s or 'infinite'.`, input);
    }
    const [, num = "", unitRaw = ""] = m;
    const size = DURATION_UNITS[unitRaw.toLowerCase()];
    if (size === undefined) {
      throw new ParseError(`Unknown duration unit '${unitRaw}'; use ms, s, m, h, d or w.`, input);
    }
    if (seen.has(size)) throw new ParseError(`The unit '${unitRaw}' appears twice.`, input);
    seen.add(size);
    total += Number(num) * size;
    any = true;
    pos = DURATION_TOKEN_RE.lastIndex;
  }
  if (!any) throw new ParseError(`'${text}' is not a duration.`, input);
  const ms = Math.round(total);
  if (total > 0 && ms === 0) throw new ParseError("Duration is shorter than one millisecond.", input);
  if (!Number.isSafeInteger(ms)) throw new ParseError("Duration is too long.", input);
  return ms;
}

export const tryParseDuration = (input: string): ParseResult<number | null> =>
  attempt(() => parseDuration(input));

// ---------------------------------------------------------------------------
// Ratios

/** 0.2 → "20%", 0.1234 → "12.3%"; `decimals` is the max fraction digits. */
export function formatPercent(ratio: number | null | undefined, decimals = 1): string {
  if (!isFiniteNumber(ratio)) return EMPTY;
  const pct = ratio * 100;
  // Avoid "-0%" for tiny negatives that round to zero.
  const text = trimZeros(pct.toFixed(Math.max(0, decimals)));
  return `${text === "-0" ? "0" : text}%`;
}

/**
 * Parse a ratio in [0, 1]: "75%" → 0.75, "0.75" → 0.75, "75 %" → 0.75.
 * A bare number above 1 is rejected (did you mean "75%"?).
 */
export function parseRatio(input: string): number {
  const text = String(input ?? "").trim();
  if (!text) throw new ParseError("Enter a ratio, e.g. 0.75 or 75%.", input);
  const m = /^([+-]?(?:\d+(?:\.\d+)?|\.\d+))\s*(%?)$/.exec(text);
  if (!m) throw new ParseError(`'${text}' is not a ratio; use e.g. 0.75 or 75%.`, input);
  const n = Number(m[1]);
  const isPercent = m[2] === "%";
  if (!isPercent && n > 1) throw new ParseError(`A ratio is between 0 and 1; did you mean ${n}%?`, input);
  const ratio = isPercent ? n / 100 : n;
  if (ratio < 0 || ratio > 1) throw new ParseError("A ratio must be between 0 and 1 (0% to 100%).", input);
  // Undo binary noise from /100 (e.g. 57% → 0.5700000000000001).
  return Number(ratio.toPrecision(12));
}

export const tryParseRatio = (input: string): ParseResult<number> => attempt(() => parseRatio(input));

// ---------------------------------------------------------------------------
// Numbers

/** Integer with thousands separators, locale-independent: 1234567 → "1,234,567". */
export function formatCount(n: number | null | undefined): string {
  if (!isFiniteNumber(n)) return EMPTY;
  return new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 }).format(n);
}

// ---------------------------------------------------------------------------
// Times (shown in the browser's time zone unless one is given)

export type DateInput = string | number | Date | null | undefined;

/** Parse an ISO 8601 string, epoch ms or Date; null when missing or invalid. */
export function toDate(value: DateInput): Date | null {
  if (value === null || value === undefined || value === "") return null;
  const d = value instanceof Date ? new Date(value.getTime()) : new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** ICU's "GMT+2" / "GMT+0" / "GMT" → "UTC+2" / "UTC" (ICU versions differ on zero). */
function offsetLabel(name: string | undefined): string {
  if (!name) return "";
  const label = name.replace(/^GMT/, "UTC");
  return /^UTC([+-]0{1,2}(:00)?)?$/.test(label) ? "UTC" : label;
}

/**
 * Absolute time as "2024-05-01 14:03:22 UTC+2" in the browser's zone
 * (or `timeZone`, e.g. "UTC" in tests). Invalid/missing → "—".
 */
export function formatDateTime(
  value: DateInput,
  opts: { timeZone?: string; seconds?: boolean } = {},
): string {
  const d = toDate(value);
  if (!d) return EMPTY;
  const fmt = new Intl.DateTimeFormat("en-US", {
    timeZone: opts.timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: opts.seconds === false ? undefined : "2-digit",
    hourCycle: "h23",
    timeZoneName: "shortOffset",
  });
  const p: Record<string, string> = {};
  for (const part of fmt.formatToParts(d)) p[part.type] = part.value;
  const time = opts.seconds === false ? `${p.hour}:${p.minute}` : `${p.hour}:${p.minute}:${p.second}`;
  return `${p.year}-${p.month}-${p.day} ${time} ${offsetLabel(p.timeZoneName)}`.trim();
}

/**
 * Relative time from `now`: "just now", "5s ago", "3m ago", "in 2h",
 * "1d 4h ago". Within ±1 s → "just now". Invalid/missing → "—".
 */
export function formatRelativeTime(
  value: DateInput,
  now: DateInput = Date.now(),
  opts: { maxParts?: number } = {},
): string {
  const d = toDate(value);
  const n = toDate(now);
  if (!d || !n) return EMPTY;
  const diff = d.getTime() - n.getTime();
  if (Math.abs(diff) < SECOND) return "just now";
  // Whole seconds are precise enough for "ago" text.
  const rounded = Math.round(Math.abs(diff) / SECOND) * SECOND;
  const text = formatDuration(rounded, { maxParts: opts.maxParts ?? 1 });
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

// ---------------------------------------------------------------------------
// Chart value axes

/** 1, 2 or 5 × 10^k: the smallest such step at or above ``raw`` (> 0). */
export function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / magnitude;
  // A hair of slack: 0.30000000000000004 / 0.1 is not above 3.
  const nice = [1, 2, 5, 10].find((n) => fraction <= n * (1 + 1e-9))!;
  return Number((nice * magnitude).toPrecision(12));
}

/** Fraction digits that tell ticks ``step`` apart (a 1-2-5 step): 0.5 → 1, 0.05 → 2, 20 → 0. */
function stepDecimals(step: number): number {
  return step >= 1 ? 0 : Math.ceil(-Math.log10(step) - 1e-9);
}

export interface AxisScale {
  min: number;
  max: number;
  interval: number;
  /** Every tick from ``min`` to ``max``, ``interval`` apart. */
  ticks: number[];
  /** The label of a tick: in one unit for the whole axis, with as many digits as the ticks need to differ. */
  label: (value: number) => string;
}

/**
 * A value axis from ``lo`` to ``hi`` in ``unit`` (a metric unit: ratio, bytes, messages, count) with
 * about ``splits`` intervals, each a round step, and labels that are never equal for two ticks.
 *
 * The labels are formatted with the step in mind, not tick by tick: ECharts' own ticks on a small
 * backlog (0, 0.5, 1, 1.5) rounded to whole messages printed "0 msgs, 1 msgs, 1 msgs, 2 msgs", and
 * formatBytes' one decimal prints 2000, 2020 and 2040 B all as "2 KiB". So counts (messages, count,
 * and bytes below 1 KiB) step by whole numbers, at least 1; bytes take one binary unit for the whole
 * axis (the one of its largest value) and the decimals its step needs; ratios are percentages with
 * the decimals their step needs.
 */
export function axisScale(lo: number, hi: number, unit: string, splits = 5): AxisScale {
  if (!Number.isFinite(lo)) lo = 0;
  if (!Number.isFinite(hi) || hi < lo) hi = lo;
  const integer = unit === "messages" || unit === "count";
  let divisor = 1;
  let suffix = "";
  if (unit === "bytes") {
    const magnitude = Math.max(Math.abs(lo), Math.abs(hi));
    let power = 0;
    while (power < BYTE_UNITS.length - 1 && 1024 ** (power + 1) <= magnitude) power += 1;
    divisor = 1024 ** power;
    suffix = ` ${BYTE_UNITS[power]}`;
  } else if (unit === "ratio") {
    divisor = 0.01; // in percent
    suffix = "%";
  } else if (unit === "messages") {
    suffix = " msgs";
  }
  const whole = integer || (unit === "bytes" && divisor === 1); // no fraction of a message or of a byte
  if (hi === lo) hi = lo + (whole ? 1 : divisor); // a flat line still gets an axis
  let stepUnits = niceStep((hi - lo) / divisor / Math.max(1, splits));
  if (whole) stepUnits = Math.max(1, stepUnits);
  const interval = stepUnits * divisor;
  const first = Math.floor(lo / interval + 1e-9);
  const last = Math.max(first + 1, Math.ceil(hi / interval - 1e-9));
  const decimals = stepDecimals(stepUnits);
  const number = new Intl.NumberFormat("en-US", { minimumFractionDigits: 0, maximumFractionDigits: decimals });
  const label = (value: number) => {
    const units = value / divisor;
    // Snap to the tick grid (floating noise, and no "-0" for a tick at zero).
    const snapped = Math.abs(units) < stepUnits / 2 ? 0 : Number(units.toFixed(decimals));
    return `${number.format(snapped)}${suffix}`;
  };
  const ticks = Array.from({ length: last - first + 1 }, (_, i) => Number(((first + i) * interval).toPrecision(12)));
  return { min: ticks[0]!, max: ticks.at(-1)!, interval: Number(interval.toPrecision(12)), ticks, label };
}
