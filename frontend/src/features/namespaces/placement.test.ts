import { describe, expect, it } from "vitest";

import { placedOn, spreadPlacement } from "./placement";

describe("placedOn", () => {
  it("names each hosting node once, in shard order", () => {
    const placement = [
      { shard: 0, node: "node-1" },
      { shard: 1, node: "node-2" },
      { shard: 2, node: "node-1" },
    ];
    expect(placedOn({ node: "node-1", placement })).toBe("node-1, node-2");
  });

  it("deals shards round-robin over the nodes", () => {
    expect(spreadPlacement(["a", "b"], 5)).toEqual(["a", "b", "a", "b", "a"]);
    expect(spreadPlacement(["a", "b", "c"], 1)).toEqual(["a"]);
    expect(spreadPlacement([], 3)).toEqual([]);
  });

  it("falls back to the namespace's node, then to a placeholder", () => {
    expect(placedOn({ node: "node-1", placement: [] })).toBe("node-1");
    expect(placedOn({ node: null, placement: [] })).toBe("no node");
  });
});
