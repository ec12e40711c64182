// @vitest-environment jsdom
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { MessageRecord, User } from "../../api/types";
import { namespace } from "../../test/fixtures";
import { callsTo, clearCookies, jsonResponse, mockFetch, renderApp } from "../../test/utils";

const viewer: User = { username: "vic", role: "viewer" };
const ns = namespace("orders");
const page = <T,>(results: T[]) => ({ next: null, previous: null, results });
const shown = (text: string) => ({ text, hex: null, size: text.length, truncated: false, tombstone: false });
const record = (shard: number, offset: number, timestamp: number, value = "v"): MessageRecord => ({
  shard,
  offset,
  timestamp,
  expire_at: null,
  effective_expires_at: null,
  key: shown("k1"),
  value: shown(value),
  tags: [],
  headers: {},
});
const query = (call: unknown[]) => new URL(String(call[0]), "http://x").searchParams;

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("messages: below the log start", () => {
  it("explains the 416 and jumps to the log start", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns]),
      "GET /api/namespaces/orders/messages": (url: string) => {
        const offset = Number(new URL(url, "http://x").searchParams.get("offset"));
        if (offset < 40) {
          return jsonResponse(
            {
              detail: "offset 3 is below the log start 40 of shard 1 (deleted by retention/expiry)",
              error: "offset_out_of_range",
              shard: 1,
              offset,
              log_start_offset: 40,
              end_offset: 90,
              below_log_start: true,
            },
            416,
          );
        }
        return jsonResponse({ records: [record(1, offset, 1_000, "survivor")], next_offset: offset + 1, next_positions: null, shards: [1] });
      },
    });
    renderApp("/messages?namespace=orders&shard=1&offset=3");
    const banner = await screen.findByTestId("messages-out-of-range");
    expect(banner.textContent).toContain("offset 3 is below the log start 40 (deleted by retention/expiry)");
    expect(screen.queryByTestId("messages-table")).toBeNull();
    fireEvent.click(screen.getByTestId("messages-jump-log-start"));
    expect((await screen.findByTestId("message-value-40")).textContent).toContain("survivor");
    expect(query(callsTo(fetch, "GET", "/api/namespaces/orders/messages").at(-1)!).get("offset")).toBe("40");
    expect(screen.queryByTestId("messages-out-of-range")).toBeNull();
    expect((screen.getByTestId("messages-offset") as HTMLInputElement).value).toBe("40");
    fireEvent.click(screen.getByTestId("messages-prev")); // back to where the jump came from
    expect(await screen.findByTestId("messages-out-of-range")).toBeTruthy();
  });
});

describe("messages: every shard", () => {
  it("looks a key up in every shard and says which one answered", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns]),
      "GET /api/namespaces/orders/messages": {
        records: [record(1, 5, 2_000, "stray")],
        next_offset: null,
        next_positions: null,
        shards: [0, 1],
        key_shard: 0,
      },
    });
    renderApp("/messages?namespace=orders&key=k1");
    expect((await screen.findByTestId("message-value-1-5")).textContent).toContain("stray");
    const note = screen.getByTestId("messages-key-shard").textContent ?? "";
    expect(note).toContain("Found on shard 1");
    expect(note).toContain("belongs on shard 0");
    expect(note).toContain("asked shards 0, 1");
    expect(query(callsTo(fetch, "GET", "/api/namespaces/orders/messages")[0]!).has("shard")).toBe(false);
    // Ask every shard: the form sends all_shards without a shard.
    fireEvent.click(screen.getByTestId("messages-every-shard"));
    fireEvent.submit(screen.getByTestId("messages-form"));
    await waitFor(() => expect(query(callsTo(fetch, "GET", "/api/namespaces/orders/messages").at(-1)!).get("all_shards")).toBe("true"));
  });

  it("searches every shard by time and pages on with positions", async () => {
    const fetch = mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns]),
      "GET /api/namespaces/orders/messages": (url: string) => {
        const q = new URL(url, "http://x").searchParams;
        if (q.get("positions")) {
          return jsonResponse({ records: [record(0, 7, 4_000)], next_offset: null, next_positions: "0:8,1:3", shards: [0, 1] });
        }
        return jsonResponse({
          records: [record(1, 2, 1_500), record(0, 6, 2_000)],
          next_offset: null,
          next_positions: "0:7,1:3",
          shards: [0, 1],
        });
      },
    });
    renderApp("/messages?namespace=orders&time=1000&limit=2");
    expect(await screen.findByTestId("message-row-1-2")).toBeTruthy();
    expect(screen.getByTestId("message-row-0-6")).toBeTruthy();
    fireEvent.click(screen.getByTestId("messages-next"));
    expect(await screen.findByTestId("message-row-0-7")).toBeTruthy();
    const sent = query(callsTo(fetch, "GET", "/api/namespaces/orders/messages").at(-1)!);
    expect(sent.get("positions")).toBe("0:7,1:3");
    expect(sent.has("time") || sent.has("shard")).toBe(false);
  });

  it("refuses every shard for an offset or a tag", async () => {
    mockFetch({ "GET /api/auth/me": viewer, "GET /api/namespaces/": page([ns]) });
    renderApp("/messages?namespace=orders");
    await screen.findByText("every shard");
    fireEvent.change(screen.getByTestId("messages-shard"), { target: { value: "all" } });
    fireEvent.submit(screen.getByTestId("messages-form"));
    expect((await screen.findByTestId("messages-form-error")).textContent).toMatch(/by key or by time/);
  });
});

describe("messages: another namespace", () => {
  const events = namespace("events");
  /** A handler whose answer waits until the test releases it. */
  const held = () => {
    let release: (r: Response) => void = () => undefined;
    const answer = new Promise<Response>((resolve) => (release = resolve));
    return { handler: () => answer, release };
  };

  it("never shows the last namespace's records under the new name", async () => {
    const pending = held();
    const fetch = mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns, events]),
      "GET /api/namespaces/orders/messages": { records: [record(0, 0, 1_000, "from-orders")], next_offset: 1, next_positions: null, shards: [0] },
      "GET /api/namespaces/events/messages": pending.handler,
    });
    renderApp("/messages?namespace=orders&shard=0&offset=0");
    expect((await screen.findByTestId("message-value-0")).textContent).toContain("from-orders");
    // Choosing another namespace drops the last one's page at once…
    fireEvent.change(screen.getByTestId("messages-namespace"), { target: { value: "events" } });
    await waitFor(() => expect(screen.queryByTestId("messages-table")).toBeNull());
    // …and while the new one loads, nothing of the old one stands in for it.
    fireEvent.submit(screen.getByTestId("messages-form"));
    await waitFor(() => expect(callsTo(fetch, "GET", "/api/namespaces/events/messages")).toHaveLength(1));
    expect(screen.queryByText(/from-orders/)).toBeNull();
    expect(screen.getByText("Reading messages…")).toBeTruthy();
    pending.release(jsonResponse({ records: [record(0, 0, 2_000, "from-events")], next_offset: 1, next_positions: null, shards: [0] }));
    expect((await screen.findByTestId("message-value-0")).textContent).toContain("from-events");
  });

  it("follows a link to another namespace: the form and the records change together", async () => {
    const pending = held();
    mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns, events]),
      "GET /api/namespaces/orders/messages": { records: [record(0, 0, 1_000, "from-orders")], next_offset: 1, next_positions: null, shards: [0] },
      "GET /api/namespaces/events/messages": pending.handler,
    });
    const { router } = renderApp("/messages?namespace=orders&shard=0&offset=0");
    expect((await screen.findByTestId("message-value-0")).textContent).toContain("from-orders");
    await router.navigate("/messages?namespace=events&shard=1&offset=5");
    await waitFor(() => expect((screen.getByTestId("messages-namespace") as HTMLSelectElement).value).toBe("events"));
    expect((screen.getByTestId("messages-shard") as HTMLSelectElement).value).toBe("1");
    expect((screen.getByTestId("messages-offset") as HTMLInputElement).value).toBe("5");
    expect(screen.queryByText(/from-orders/)).toBeNull();
    pending.release(jsonResponse({ records: [record(1, 5, 2_000, "from-events")], next_offset: 6, next_positions: null, shards: [1] }));
    expect((await screen.findByTestId("message-value-5")).textContent).toContain("from-events");
  });
});

describe("messages: 64-bit offsets", () => {
  it.each(["99999999999999999999", "9007199254740993"])("sends the offset %s as typed, digit for digit", async (typed) => {
    const fetch = mockFetch({
      "GET /api/auth/me": viewer,
      "GET /api/namespaces/": page([ns]),
      "GET /api/namespaces/orders/messages": { records: [], next_offset: null, next_positions: null, shards: [0] },
    });
    renderApp("/messages?namespace=orders");
    await screen.findByText("every shard");
    fireEvent.change(screen.getByTestId("messages-shard"), { target: { value: "0" } });
    fireEvent.change(screen.getByTestId("messages-offset"), { target: { value: typed } });
    fireEvent.submit(screen.getByTestId("messages-form"));
    await waitFor(() => expect(callsTo(fetch, "GET", "/api/namespaces/orders/messages")).toHaveLength(1));
    expect(query(callsTo(fetch, "GET", "/api/namespaces/orders/messages")[0]!).get("offset")).toBe(typed);
  });
});
