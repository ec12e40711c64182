// @vitest-environment jsdom
// Freed and pending bytes (issue 26): a run's freed bytes (files removed) and the bytes still on disk as .deleted
// files are two server figures, shown side by side as sent; the UI never derives one from the other or the counts.
import { screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { User } from "../../api/types";
import { namespace } from "../../test/fixtures";
import { clearCookies, mockFetch, renderApp, taskRun } from "../../test/utils";

const operator: User = { username: "olga", role: "operator" };
const page = <T,>(results: T[]) => ({ next: null, previous: null, results });

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("tasks: freed and pending deletion", () => {
  it("shows a retention run's freed bytes and its pending bytes separately, as the server sends them", async () => {
    // The counts' bytes would add up to neither figure: what is shown is bytes_reclaimed and summary.pending_bytes.
    const run = taskRun(7, {
      kind: "retention",
      state: "succeeded",
      counts: { segments_deleted: 3, records_removed: 900 },
      bytes_reclaimed: 1024,
      summary: { records: 900, segments: 3, bytes: 1024, pending_bytes: 3 * 1024 ** 2 },
    });
    mockFetch({
      "GET /api/auth/me": operator,
      "GET /api/namespaces/": page([namespace("orders")]),
      "GET /api/nodes/": [],
      "GET /api/runs/": page([run]),
      "GET /api/runs/7/": run,
    });
    renderApp("/tasks?run=7");
    await waitFor(() => expect(screen.getByTestId("run-detail-freed").textContent).toBe("1 KiB"));
    expect(screen.getByTestId("run-detail-pending").textContent).toBe("3 MiB");
  });
});
