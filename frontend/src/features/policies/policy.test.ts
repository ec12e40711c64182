import { describe, expect, it } from "vitest";
import type { PolicyField } from "../../api/types";
import {
  computePolicyDiff,
  formatPolicyValue,
  groupPolicyFields,
  initialDraft,
  parseDraft,
  parsePolicyText,
  policyValuesEqual,
  toEditText,
  type FieldDraft,
} from "./policy";

const f = (extra: Partial<PolicyField>): PolicyField => ({
  value: 0,
  source: "builtin",
  overridden: false,
  default: 0,
  group: "expiry",
  unit: "count",
  nullable: false,
  choices: [],
  help: "",
  ...extra,
});

const DAY = 86_400_000;

describe("formatPolicyValue", () => {
  it("shows each unit in human terms", () => {
    expect(formatPolicyValue(f({ unit: "ms" }), 7 * DAY)).toBe("7d");
    expect(formatPolicyValue(f({ unit: "ms" }), 5_400_000)).toBe("1h 30m");
    expect(formatPolicyValue(f({ unit: "bytes" }), 512 * 1024 ** 2)).toBe("512 MiB");
    expect(formatPolicyValue(f({ unit: "ratio" }), 0.75)).toBe("75%");
    expect(formatPolicyValue(f({ unit: "count" }), 100000)).toBe("100,000");
    expect(formatPolicyValue(f({ unit: "bool" }), true)).toBe("on");
    expect(formatPolicyValue(f({ unit: "bool" }), false)).toBe("off");
    expect(formatPolicyValue(f({ unit: "choice" }), "compact,delete")).toBe("compact,delete");
    expect(formatPolicyValue(f({ unit: "hours" }), "04")).toBe("04");
  });

  it("shows null as infinite (or 'not set' for hours) and undefined as a dash", () => {
    expect(formatPolicyValue(f({ unit: "ms" }), null)).toBe("infinite");
    expect(formatPolicyValue(f({ unit: "bytes" }), null)).toBe("infinite");
    expect(formatPolicyValue(f({ unit: "hours" }), null)).toBe("not set");
    expect(formatPolicyValue(f({ unit: "ms" }), undefined)).toBe("—");
  });
});

describe("toEditText / parsePolicyText round trip", () => {
  const cases: [PolicyField["unit"], number | string | boolean][] = [
    ["ms", 7 * DAY],
    ["ms", 5_400_000],
    ["ms", 1_500],
    ["ms", 90_061_001],
    ["bytes", 512 * 1024 ** 2],
    ["bytes", 1536],
    ["bytes", 10 * 1024 ** 3],
    ["ratio", 0.75],
    ["ratio", 0.333],
    ["ratio", 0.057],
    ["count", 1000],
    ["hours", "01-05"],
  ];
  it.each(cases)("%s %s", (unit, value) => {
    const text = toEditText(unit, value);
    expect(parsePolicyText(f({ unit }), text)).toEqual({ ok: true, value });
  });

  it("writes lossless edit text", () => {
    expect(toEditText("ms", 5_400_000)).toBe("1h 30m");
    expect(toEditText("bytes", 1536)).toBe("1536 B");
    expect(toEditText("ratio", 0.755)).toBe("75.5%");
    expect(toEditText("ms", null)).toBe("");
  });
});

describe("parsePolicyText", () => {
  it("parses human units into base units", () => {
    expect(parsePolicyText(f({ unit: "ms" }), "1h 30m")).toEqual({ ok: true, value: 5_400_000 });
    expect(parsePolicyText(f({ unit: "bytes" }), "512MiB")).toEqual({ ok: true, value: 536_870_912 });
    expect(parsePolicyText(f({ unit: "ratio" }), "85%")).toEqual({ ok: true, value: 0.85 });
    expect(parsePolicyText(f({ unit: "ratio" }), "0.85")).toEqual({ ok: true, value: 0.85 });
    expect(parsePolicyText(f({ unit: "count" }), "1,000")).toEqual({ ok: true, value: 1000 });
    expect(parsePolicyText(f({ unit: "bool" }), "false")).toEqual({ ok: true, value: false });
    expect(parsePolicyText(f({ unit: "choice", choices: ["delete", "compact"] }), "compact")).toEqual({ ok: true, value: "compact" });
  });

  it("accepts 'infinite' only on nullable fields", () => {
    expect(parsePolicyText(f({ unit: "ms", nullable: true }), "infinite")).toEqual({ ok: true, value: null });
    expect(parsePolicyText(f({ unit: "bytes", nullable: true }), "unlimited")).toEqual({ ok: true, value: null });
    const r = parsePolicyText(f({ unit: "ms", nullable: false }), "infinite");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(/cannot be infinite/);
  });

  it("explains bad input", () => {
    const bad = (unit: PolicyField["unit"], text: string, re: RegExp, extra: Partial<PolicyField> = {}) => {
      const r = parsePolicyText(f({ unit, ...extra }), text);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error).toMatch(re);
    };
    bad("ms", "7", /Add a unit/);
    bad("ms", "7 parsecs", /not a duration|Unknown duration unit/);
    bad("bytes", "12 XB", /Unknown size unit/);
    bad("ratio", "75", /did you mean 75%/);
    bad("ratio", "120%", /between 0 and 1/);
    bad("count", "-3", /positive whole number/);
    bad("count", "1.5", /not a whole number/);
    bad("count", "", /Enter a whole number/);
    bad("choice", "nope", /Choose one of: delete, compact/, { choices: ["delete", "compact"] });
    bad("hours", "  ", /Enter hours/);
  });
});

describe("drafts", () => {
  it("starts from the server's value in edit units", () => {
    expect(initialDraft(f({ unit: "ms", value: 7 * DAY, overridden: true }))).toEqual({ override: true, text: "7d", infinite: false });
    expect(initialDraft(f({ unit: "bool", value: true }))).toEqual({ override: false, text: "true", infinite: false });
    // An infinite value keeps the default as the text to fall back to.
    expect(initialDraft(f({ unit: "ms", nullable: true, value: null, default: DAY }))).toEqual({
      override: false,
      text: "1d",
      infinite: true,
    });
  });

  it("the infinite toggle wins over the text on nullable fields only", () => {
    expect(parseDraft(f({ unit: "ms", nullable: true }), { override: true, text: "1d", infinite: true })).toEqual({ ok: true, value: null });
    expect(parseDraft(f({ unit: "ms", nullable: false }), { override: true, text: "1d", infinite: true })).toEqual({ ok: true, value: DAY });
  });

  it("compares numbers with float tolerance", () => {
    expect(policyValuesEqual(0.57, 0.5700000000000001)).toBe(true);
    expect(policyValuesEqual(0.57, 0.58)).toBe(false);
    expect(policyValuesEqual(null, 0)).toBe(false);
    expect(policyValuesEqual("a", "a")).toBe(true);
  });
});

describe("computePolicyDiff", () => {
  const fields: Record<string, PolicyField> = {
    ttl_ms: f({ unit: "ms", nullable: true, value: DAY, source: "namespace", overridden: true, default: null }),
    retention_ms: f({ unit: "ms", nullable: true, value: 7 * DAY, source: "cluster", overridden: false, default: 7 * DAY, group: "retention" }),
    reclaim_dead_ratio: f({ unit: "ratio", value: 0.5, source: "builtin", default: 0.5 }),
    scan_batch_size: f({ unit: "count", value: 1000, source: "namespace", overridden: true, default: 1000 }),
  };
  const d = (override: boolean, text: string, infinite = false): FieldDraft => ({ override, text, infinite });

  it("is empty without drafts, or when drafts match the server", () => {
    expect(computePolicyDiff(fields, {})).toEqual({ request: { set: {}, reset: [] }, changes: [], errors: {} });
    const same = computePolicyDiff(fields, { ttl_ms: d(true, "24h"), retention_ms: d(false, "7d") });
    expect(same.changes).toEqual([]);
  });

  it("sets changed values in base units", () => {
    const r = computePolicyDiff(fields, { ttl_ms: d(true, "12h"), reclaim_dead_ratio: d(true, "60%") });
    expect(r.request).toEqual({ set: { ttl_ms: 43_200_000, reclaim_dead_ratio: 0.6 }, reset: [] });
    expect(r.changes).toEqual([
      { field: "ttl_ms", kind: "set", before: DAY, beforeSource: "namespace", after: 43_200_000 },
      { field: "reclaim_dead_ratio", kind: "set", before: 0.5, beforeSource: "builtin", after: 0.6 },
    ]);
  });

  it("pins an inherited value when the override is turned on without a change", () => {
    const r = computePolicyDiff(fields, { retention_ms: d(true, "7d") });
    expect(r.request).toEqual({ set: { retention_ms: 7 * DAY }, reset: [] });
  });

  it("sets infinite as null", () => {
    const r = computePolicyDiff(fields, { ttl_ms: d(true, "1d", true) });
    expect(r.request.set).toEqual({ ttl_ms: null });
    expect(r.changes[0]!.after).toBeNull();
  });

  it("resets an overridden field whose override is turned off", () => {
    const r = computePolicyDiff(fields, { scan_batch_size: d(false, "1000") });
    expect(r.request).toEqual({ set: {}, reset: ["scan_batch_size"] });
    expect(r.changes).toEqual([{ field: "scan_batch_size", kind: "reset", before: 1000, beforeSource: "namespace", after: undefined }]);
  });

  it("reports unparseable drafts and leaves them out of the request", () => {
    const r = computePolicyDiff(fields, { ttl_ms: d(true, "soon"), scan_batch_size: d(true, "2000") });
    expect(Object.keys(r.errors)).toEqual(["ttl_ms"]);
    expect(r.request).toEqual({ set: { scan_batch_size: 2000 }, reset: [] });
  });
});

describe("groupPolicyFields", () => {
  it("orders known groups first and keeps unknown ones", () => {
    const groups = groupPolicyFields({
      a: f({ group: "compaction" }),
      b: f({ group: "weird" as PolicyField["group"] }), // a group this UI does not know
      c: f({ group: "expiry" }),
      d: f({ group: "expiry" }),
    });
    expect(groups.map(([g, fs]) => [g, fs.map(([n]) => n)])).toEqual([
      ["expiry", ["c", "d"]],
      ["compaction", ["a"]],
      ["weird", ["b"]],
    ]);
  });
});
