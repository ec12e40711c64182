import { describe, expect, it } from "vitest";
import {
  axisScale,
  EMPTY,
  formatBytes,
  formatBytesExact,
  formatCount,
  formatDateTime,
  formatDuration,
  formatDurationExact,
  formatPercent,
  formatRelativeTime,
  MS,
  niceStep,
  ParseError,
  parseDuration,
  parseRatio,
  parseSize,
  toDate,
  tryParseDuration,
  tryParseRatio,
  tryParseSize,
} from "./format";

const KiB = 1024;
const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const TiB = 1024 ** 4;

describe("formatBytes", () => {
  it.each([
    [0, "0 B"],
    [1, "1 B"],
    [1023, "1023 B"],
    [1024, "1 KiB"],
    [1536, "1.5 KiB"],
    [512 * MiB, "512 MiB"],
    [1.25 * GiB, "1.3 GiB"],
    [10 * TiB, "10 TiB"],
    [1024 ** 5, "1 PiB"],
    [1024 ** 6, "1 EiB"],
  ])("%d → %s", (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });

  it("promotes when rounding reaches 1024 of a unit", () => {
    expect(formatBytes(MiB - 1)).toBe("1 MiB");
    expect(formatBytes(GiB - 1)).toBe("1 GiB");
  });

  it("does not go past the largest unit", () => {
    expect(formatBytes(1024 ** 7)).toBe("1024 EiB");
  });

  it("honours decimals and trims trailing zeros", () => {
    expect(formatBytes(1.2345 * GiB, { decimals: 2 })).toBe("1.23 GiB");
    expect(formatBytes(2 * GiB, { decimals: 3 })).toBe("2 GiB");
    expect(formatBytes(1.6 * KiB, { decimals: 0 })).toBe("2 KiB");
  });

  it("keeps the sign of negative deltas", () => {
    expect(formatBytes(-512 * MiB)).toBe("-512 MiB");
  });

  it("shows a dash for missing or non-finite values", () => {
    expect(formatBytes(null)).toBe(EMPTY);
    expect(formatBytes(undefined)).toBe(EMPTY);
    expect(formatBytes(Number.NaN)).toBe(EMPTY);
    expect(formatBytes(Number.POSITIVE_INFINITY)).toBe(EMPTY);
  });

  it("can render null as infinite", () => {
    expect(formatBytes(null, { infinite: "∞" })).toBe("∞");
  });
});

describe("formatBytesExact", () => {
  it("uses the largest unit that divides evenly", () => {
    expect(formatBytesExact(512 * MiB)).toBe("512 MiB");
    expect(formatBytesExact(1536)).toBe("1536 B");
    expect(formatBytesExact(1536 * MiB)).toBe("1536 MiB");
    expect(formatBytesExact(0)).toBe("0 B");
    expect(formatBytesExact(null)).toBe("infinite");
  });

  it("round-trips through parseSize", () => {
    for (const n of [0, 1, 1000, 1024, 1536, 512 * MiB, 3 * GiB + 1, 7 * TiB, Number.MAX_SAFE_INTEGER]) {
      expect(parseSize(formatBytesExact(n))).toBe(n);
    }
    expect(parseSize(formatBytesExact(null))).toBeNull();
  });

  it("rejects non-integers", () => {
    expect(() => formatBytesExact(1.5)).toThrow(RangeError);
    expect(() => formatBytesExact(Number.NaN)).toThrow(RangeError);
  });
});

describe("parseSize", () => {
  it.each([
    ["512MiB", 512 * MiB],
    ["512 MiB", 512 * MiB],
    ["512 mib", 512 * MiB],
    ["  10 GiB ", 10 * GiB],
    ["1.5GiB", 1.5 * GiB],
    ["1.5 KiB", 1536],
    [".5 KiB", 512],
    ["4096", 4096],
    ["4096 B", 4096],
    ["4096 bytes", 4096],
    ["0", 0],
    ["0 B", 0],
    ["+1KiB", 1024],
    ["512m", 512 * MiB],
    ["2G", 2 * GiB],
    ["1k", 1024],
    ["1 TiB", TiB],
    ["1 PiB", 1024 ** 5],
    // SI units are decimal, as labelled.
    ["100 KB", 100_000],
    ["1MB", 1_000_000],
    ["2 GB", 2_000_000_000],
    // Fractions round to the nearest byte.
    ["0.1 KiB", 102],
  ])("%j → %d", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["infinite", "Infinite", "INFINITY", "inf", "unlimited", "never", " infinite "])(
    "%j → null (no limit)",
    (text) => {
      expect(parseSize(text)).toBeNull();
    },
  );

  it.each([
    ["", /Enter a size/],
    ["   ", /Enter a size/],
    ["abc", /not a size/],
    ["MiB", /not a size/],
    ["12 parsecs", /Unknown size unit 'parsecs'/],
    ["5 XiB", /Unknown size unit/],
    ["-1", /cannot be negative/],
    ["-5 MiB", /cannot be negative/],
    ["1.2.3 MiB", /not a size/],
    ["1,024", /not a size/],
    ["1e3", /Unknown size unit|not a size/],
    ["10 MiB 5 KiB", /not a size/],
    ["0.0001 B", /smaller than one byte/],
    ["99999999 PiB", /too large/],
  ])("rejects %j", (text, message) => {
    expect(() => parseSize(text)).toThrow(ParseError);
    expect(() => parseSize(text)).toThrow(message);
  });

  it("accepts -0 as zero", () => {
    expect(parseSize("-0")).toBe(0);
  });

  it("reports the original input on the error", () => {
    try {
      parseSize("12 parsecs");
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ParseError);
      expect((err as ParseError).input).toBe("12 parsecs");
    }
  });

  it("has a non-throwing variant for forms", () => {
    expect(tryParseSize("1 GiB")).toEqual({ ok: true, value: GiB });
    expect(tryParseSize("infinite")).toEqual({ ok: true, value: null });
    const bad = tryParseSize("lots");
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error).toMatch(/not a size/);
  });
});

describe("formatDuration", () => {
  it.each([
    [0, "0s"],
    [1, "1ms"],
    [250, "250ms"],
    [999, "999ms"],
    [1000, "1s"],
    [1500, "1s 500ms"],
    [45 * MS.second, "45s"],
    [90 * MS.second, "1m 30s"],
    [5400 * MS.second, "1h 30m"],
    [MS.hour, "1h"],
    [7 * MS.day, "7d"],
    [MS.week, "7d"],
    [MS.day + 2 * MS.hour + 3 * MS.minute, "1d 2h"],
    [72 * MS.hour, "3d"],
    [365 * MS.day, "365d"],
  ])("%d ms → %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it("rounds the smallest unit shown, carrying into larger units", () => {
    expect(formatDuration(MS.hour + 29 * MS.minute + 59 * MS.second)).toBe("1h 30m");
    expect(formatDuration(23 * MS.hour + 59 * MS.minute + 59 * MS.second)).toBe("1d");
    expect(formatDuration(59_600, { maxParts: 1 })).toBe("1m");
    expect(formatDuration(1500, { maxParts: 1 })).toBe("2s");
  });

  it("respects maxParts", () => {
    const ms = MS.day + 2 * MS.hour + 3 * MS.minute + 4 * MS.second + 5;
    expect(formatDuration(ms, { maxParts: 1 })).toBe("1d");
    expect(formatDuration(ms, { maxParts: 3 })).toBe("1d 2h 3m");
    expect(formatDuration(ms, { maxParts: 5 })).toBe("1d 2h 3m 4s 5ms");
    expect(formatDuration(ms, { maxParts: 0 })).toBe("1d"); // clamped to 1
  });

  it("skips zero units in the middle", () => {
    expect(formatDuration(MS.day + 5 * MS.minute, { maxParts: 3 })).toBe("1d 5m");
  });

  it("handles negative, fractional and missing values", () => {
    expect(formatDuration(-90 * MS.second)).toBe("-1m 30s");
    expect(formatDuration(0.4)).toBe("0s");
    expect(formatDuration(null)).toBe(EMPTY);
    expect(formatDuration(undefined)).toBe(EMPTY);
    expect(formatDuration(Number.NaN)).toBe(EMPTY);
    expect(formatDuration(null, { infinite: "infinite" })).toBe("infinite");
  });
});

describe("formatDurationExact", () => {
  it("keeps every unit", () => {
    expect(formatDurationExact(MS.day + 1)).toBe("1d 1ms");
    expect(formatDurationExact(0)).toBe("0s");
    expect(formatDurationExact(null)).toBe("infinite");
  });

  it("round-trips through parseDuration", () => {
    const samples = [0, 1, 999, 1000, 1001, 5_400_000, 604_800_000, 86_400_000 + 3_723_004, 2 ** 40 + 7];
    for (const ms of samples) {
      expect(parseDuration(formatDurationExact(ms))).toBe(ms);
    }
  });

  it("rejects non-integers", () => {
    expect(() => formatDurationExact(1.5)).toThrow(RangeError);
  });
});

describe("parseDuration", () => {
  it.each([
    ["7d", 7 * MS.day],
    ["1h 30m", 90 * MS.minute],
    ["1h30m", 90 * MS.minute],
    ["1h, 30m", 90 * MS.minute],
    ["30m 1h", 90 * MS.minute],
    ["1.5h", 90 * MS.minute],
    ["90s", 90 * MS.second],
    ["250ms", 250],
    ["10 ms", 10],
    ["1m", MS.minute],
    ["2w", 14 * MS.day],
    ["2 weeks", 14 * MS.day],
    ["3 days 4 hours", 3 * MS.day + 4 * MS.hour],
    ["1 hr 5 mins 10 secs", MS.hour + 5 * MS.minute + 10 * MS.second],
    ["1D 2H", MS.day + 2 * MS.hour],
    ["  72h  ", 72 * MS.hour],
    ["+5m", 5 * MS.minute],
    ["0", 0],
    ["0.0", 0],
    ["0s", 0],
    ["1d 1ms", MS.day + 1],
    [".5s", 500],
    ["1.0005s", 1001], // rounds to the nearest ms
  ])("%j → %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["infinite", "INFINITE", "infinity", "inf", "unlimited", "never", "∞"])("%j → null", (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  it.each([
    ["", /Enter a duration/],
    ["  ", /Enter a duration/],
    ["-1", /cannot be negative/],
    ["-5m", /cannot be negative/],
    ["3600", /Add a unit to '3600'/],
    ["1.5", /Add a unit/],
    ["5 fortnights", /Unknown duration unit 'fortnights'/],
    ["1mo", /Unknown duration unit 'mo'/],
    ["1y", /Unknown duration unit 'y'/],
    ["1h 2h", /appears twice/],
    ["1h 60 minutes 1m", /appears twice/],
    ["h", /not a duration/],
    ["1h 30", /not a duration/],
    ["1h-30m", /not a duration/],
    ["1..5h", /not a duration/],
    ["abc", /Unknown duration unit|not a duration/],
    ["0.0001ms", /shorter than one millisecond/],
    ["99999999999w", /too long/],
  ])("rejects %j", (text, message) => {
    expect(() => parseDuration(text)).toThrow(ParseError);
    expect(() => parseDuration(text)).toThrow(message);
  });

  it("parses the same value repeatedly (no shared regex state)", () => {
    expect(parseDuration("1h 30m")).toBe(parseDuration("1h 30m"));
    expect(() => parseDuration("1h 30")).toThrow(ParseError);
    expect(parseDuration("2h")).toBe(2 * MS.hour);
  });

  it("has a non-throwing variant for forms", () => {
    expect(tryParseDuration("7d")).toEqual({ ok: true, value: 7 * MS.day });
    expect(tryParseDuration("never")).toEqual({ ok: true, value: null });
    expect(tryParseDuration("soon")).toMatchObject({ ok: false });
  });
});

describe("formatPercent", () => {
  it.each([
    [0, "0%"],
    [0.2, "20%"],
    [0.75, "75%"],
    [0.1234, "12.3%"],
    [0.125, "12.5%"],
    [1, "100%"],
    [1.5, "150%"],
    [0.0001, "0%"],
    [-0.0001, "0%"],
    [-0.05, "-5%"],
  ])("%d → %s", (ratio, text) => {
    expect(formatPercent(ratio)).toBe(text);
  });

  it("honours decimals", () => {
    expect(formatPercent(0.12345, 2)).toBe("12.35%");
    expect(formatPercent(0.12345, 0)).toBe("12%");
    expect(formatPercent(0.5, 3)).toBe("50%");
  });

  it("shows a dash for missing values", () => {
    expect(formatPercent(null)).toBe(EMPTY);
    expect(formatPercent(undefined)).toBe(EMPTY);
    expect(formatPercent(Number.NaN)).toBe(EMPTY);
  });
});

describe("parseRatio", () => {
  it.each([
    ["0.75", 0.75],
    ["75%", 0.75],
    ["75 %", 0.75],
    ["57%", 0.57],
    ["0", 0],
    ["1", 1],
    ["100%", 1],
    ["12.5%", 0.125],
    [".9", 0.9],
  ])("%j → %d", (text, ratio) => {
    expect(parseRatio(text)).toBe(ratio);
  });

  it.each([
    ["", /Enter a ratio/],
    ["75", /did you mean 75%/],
    ["101%", /between 0 and 1/],
    ["-0.1", /between 0 and 1/],
    ["half", /not a ratio/],
    ["0.5%%", /not a ratio/],
  ])("rejects %j", (text, message) => {
    expect(() => parseRatio(text)).toThrow(message);
  });

  it("round-trips with formatPercent", () => {
    for (const r of [0, 0.2, 0.75, 0.85, 0.9, 1]) {
      expect(parseRatio(formatPercent(r))).toBe(r);
    }
    expect(tryParseRatio("x")).toMatchObject({ ok: false });
  });
});

describe("formatCount", () => {
  it("groups thousands independent of locale", () => {
    expect(formatCount(0)).toBe("0");
    expect(formatCount(1234567)).toBe("1,234,567");
    expect(formatCount(-1000)).toBe("-1,000");
    expect(formatCount(null)).toBe(EMPTY);
  });
});

describe("times", () => {
  const iso = "2024-05-01T12:03:04Z";

  it("toDate accepts ISO strings, epoch ms and Dates, and rejects garbage", () => {
    expect(toDate(iso)?.getTime()).toBe(Date.UTC(2024, 4, 1, 12, 3, 4));
    expect(toDate(0)?.getTime()).toBe(0);
    const d = new Date(iso);
    const copy = toDate(d);
    expect(copy?.getTime()).toBe(d.getTime());
    expect(copy).not.toBe(d);
    expect(toDate("not a date")).toBeNull();
    expect(toDate("")).toBeNull();
    expect(toDate(null)).toBeNull();
    expect(toDate(undefined)).toBeNull();
  });

  it("formatDateTime shows the given zone with its offset", () => {
    expect(formatDateTime(iso, { timeZone: "UTC" })).toBe("2024-05-01 12:03:04 UTC");
    expect(formatDateTime(iso, { timeZone: "Europe/Berlin" })).toBe("2024-05-01 14:03:04 UTC+2");
    expect(formatDateTime(iso, { timeZone: "Asia/Kolkata" })).toBe("2024-05-01 17:33:04 UTC+5:30");
    expect(formatDateTime(iso, { timeZone: "America/New_York", seconds: false })).toBe("2024-05-01 08:03 UTC-4");
    // Zero offsets read "UTC" whatever the ICU build calls them (GMT, GMT+0).
    expect(formatDateTime("2024-01-15T10:00:00Z", { timeZone: "Europe/London" })).toBe("2024-01-15 10:00:00 UTC");
  });

  it("formatDateTime uses a 24-hour clock around midnight", () => {
    expect(formatDateTime("2024-01-01T00:05:00Z", { timeZone: "UTC" })).toBe("2024-01-01 00:05:00 UTC");
    expect(formatDateTime("2024-01-01T23:59:59Z", { timeZone: "UTC" })).toBe("2024-01-01 23:59:59 UTC");
  });

  it("formatDateTime defaults to the browser's zone", () => {
    const expected = formatDateTime(iso, { timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone });
    expect(formatDateTime(iso)).toBe(expected);
  });

  it("formatDateTime shows a dash for invalid input", () => {
    expect(formatDateTime("nope")).toBe(EMPTY);
    expect(formatDateTime(null)).toBe(EMPTY);
  });

  it("formatRelativeTime describes past and future", () => {
    const now = Date.parse(iso);
    expect(formatRelativeTime(now, now)).toBe("just now");
    expect(formatRelativeTime(now - 999, now)).toBe("just now");
    expect(formatRelativeTime(now + 999, now)).toBe("just now");
    expect(formatRelativeTime(now - 5_000, now)).toBe("5s ago");
    expect(formatRelativeTime(now - 3 * MS.minute, now)).toBe("3m ago");
    expect(formatRelativeTime(now + 2 * MS.hour, now)).toBe("in 2h");
    expect(formatRelativeTime(now - (MS.day + 4 * MS.hour), now)).toBe("1d ago");
    expect(formatRelativeTime(now - (MS.day + 4 * MS.hour), now, { maxParts: 2 })).toBe("1d 4h ago");
    expect(formatRelativeTime("2024-05-01T12:02:04Z", iso)).toBe("1m ago");
  });

  it("formatRelativeTime shows a dash for invalid input", () => {
    expect(formatRelativeTime("garbage", Date.now())).toBe(EMPTY);
    expect(formatRelativeTime(iso, "garbage")).toBe(EMPTY);
    expect(formatRelativeTime(null)).toBe(EMPTY);
  });
});

// Issue 16: a backlog axis read "1 msgs, 1 msgs, 0 msgs" (ticks at 0.5 steps rounded to whole messages).
describe("chart value axes", () => {
  const labels = (lo: number, hi: number, unit: string) => {
    const scale = axisScale(lo, hi, unit);
    return scale.ticks.map(scale.label);
  };
  const distinct = (xs: string[]) => new Set(xs).size === xs.length;

  it("steps by 1, 2 or 5 times a power of ten", () => {
    expect([0.13, 0.2, 0.21, 0.7, 1, 3, 45, 1203].map(niceStep)).toEqual([0.2, 0.2, 0.5, 1, 1, 5, 50, 2000]);
    expect(niceStep(0.30000000000000004)).toBe(0.5);
    expect(niceStep(0)).toBe(1);
  });

  it("gives counts whole-number ticks with distinct labels, however small the values", () => {
    expect(labels(0, 1, "messages")).toEqual(["0 msgs", "1 msgs"]);
    expect(labels(0, 2, "messages")).toEqual(["0 msgs", "1 msgs", "2 msgs"]);
    expect(labels(0, 0.4, "count")).toEqual(["0", "1"]); // step averages below one: still whole ticks
    expect(labels(0, 0, "messages")).toEqual(["0 msgs", "1 msgs"]); // a flat zero line
    expect(labels(0, 6017, "messages")).toEqual(["0 msgs", "2,000 msgs", "4,000 msgs", "6,000 msgs", "8,000 msgs"]);
    for (const hi of [1, 2, 3, 4, 7, 9, 11, 13, 99, 101]) {
      const scale = axisScale(0, hi, "messages");
      expect(scale.interval).toBeGreaterThanOrEqual(1);
      expect(scale.ticks.every(Number.isInteger)).toBe(true);
      expect(distinct(scale.ticks.map(scale.label))).toBe(true);
      expect(scale.max).toBeGreaterThanOrEqual(hi);
    }
  });

  it("labels bytes in one binary unit per axis with the decimals its step needs", () => {
    // formatBytes would print 2000, 2020 and 2040 B all as "2 KiB".
    expect(labels(1990, 2050, "bytes")).toEqual(["1.94 KiB", "1.96 KiB", "1.98 KiB", "2 KiB", "2.02 KiB"]);
    expect(labels(0, 3 * 1024 ** 2, "bytes")).toEqual(["0 MiB", "1 MiB", "2 MiB", "3 MiB"]);
    expect(labels(0, 1.2 * 1024 ** 3, "bytes")).toEqual(["0 GiB", "0.5 GiB", "1 GiB", "1.5 GiB"]);
    expect(labels(0, 3, "bytes")).toEqual(["0 B", "1 B", "2 B", "3 B"]); // no half bytes
    for (const hi of [5, 700, 1023, 1025, 5000, 123_456, 10 * 1024 ** 2 + 1, 7.7 * 1024 ** 4]) {
      for (const lo of [0, hi * 0.97]) expect(distinct(labels(lo, hi, "bytes"))).toBe(true);
    }
  });

  it("labels ratios as percentages, 0-100 % in 20 % steps", () => {
    expect(labels(0, 1, "ratio")).toEqual(["0%", "20%", "40%", "60%", "80%", "100%"]);
    expect(labels(0, 0.03, "ratio")).toEqual(["0%", "1%", "2%", "3%"]);
    expect(distinct(labels(0.1, 0.104, "ratio"))).toBe(true);
  });
});
