import { describe, expect, it } from "vitest";
import { foldText, foldWindowText } from "./RunFold";
import { runDuration } from "./Runs";

const local = (h: number, m = 0, s = 0) => new Date(2024, 4, 1, h, m, s).toISOString();

describe("a folded row of sweeps reads as how many and when", () => {
  it("an hour's window is its start to its last minute", () => {
    const row = { sweeps: 42, window_start: local(10), window_end: local(11) };
    expect(foldWindowText(row)).toBe("10:00–10:59");
    expect(foldText(row)).toBe("42 sweeps, 10:00–10:59");
  });

  it("counts read as numbers and one sweep is a sweep", () => {
    expect(foldText({ sweeps: 3600, window_start: local(23), window_end: local(23, 30) })).toBe("3,600 sweeps, 23:00–23:29");
    expect(foldText({ sweeps: 1, window_start: local(9), window_end: local(10) })).toBe("1 sweep, 09:00–09:59");
  });

  it("a window that is not whole minutes shows seconds; a zone can be given", () => {
    expect(foldWindowText({ sweeps: 5, window_start: local(10, 0, 0), window_end: local(10, 0, 30) })).toBe("10:00:00–10:00:29");
    const utc = { sweeps: 2, window_start: "2024-05-01T10:00:00Z", window_end: "2024-05-01T11:00:00Z" };
    expect(foldWindowText(utc, "UTC")).toBe("10:00–10:59");
  });

  it("a run of its own has no window", () => {
    expect(foldText({ sweeps: 1, window_start: null, window_end: null })).toBeNull();
    expect(foldText({ sweeps: 1, window_start: local(11), window_end: local(10) })).toBeNull();
  });
});

describe("a folded row has no duration of its own", () => {
  it("its start and finish span the window, not a sweep", () => {
    const times = { started_at: "2024-05-01T10:00:01Z", finished_at: "2024-05-01T10:59:58Z" };
    expect(runDuration({ ...times, window_start: "2024-05-01T10:00:00Z" }, Date.now())).toBeNull();
    expect(runDuration({ ...times, window_start: null }, Date.now())).toBe(3597_000);
  });
});
