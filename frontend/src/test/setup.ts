import { afterEach } from "vitest";

// DOM tests (// @vitest-environment jsdom) unmount what they rendered.
if (typeof document !== "undefined") {
  const { cleanup } = await import("@testing-library/react");
  afterEach(() => cleanup());
}
