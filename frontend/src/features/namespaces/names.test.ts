import { describe, expect, it } from "vitest";
import rule from "./nameRule.json";
import { NAME_EXAMPLES, NAME_HINT, NAME_MAX_LENGTH, nameProblem } from "./names";

describe("the namespace name hint", () => {
  it("accepts every name it shows as an example", () => {
    expect(NAME_EXAMPLES.length).toBeGreaterThan(0);
    for (const name of NAME_EXAMPLES) {
      expect(NAME_HINT).toContain(name);
      expect(nameProblem(name)).toBeNull();
    }
  });

  it("states the limits the check enforces", () => {
    expect(NAME_HINT).toContain(`1-${NAME_MAX_LENGTH} characters`);
    expect(NAME_HINT).toContain("ASCII");
    for (const reserved of rule.reserved) expect(NAME_HINT).toContain(`'${reserved}'`);
    expect(nameProblem("x".repeat(NAME_MAX_LENGTH))).toBeNull();
    for (const refused of ["x".repeat(NAME_MAX_LENGTH + 1), ".", "..", "é", "a b", "a/b"]) {
      expect(nameProblem(refused)).toBe(`The name ${rule.rule}.`);
    }
  });
});
