// @vitest-environment jsdom
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { beforeEach, describe, expect, it } from "vitest";
import { resetCsrfToken } from "../../api/client";
import type { SubscriptionRow, User } from "../../api/types";
import { namespace } from "../../test/fixtures";
import { body, callsTo, clearCookies, jsonResponse, mockFetch, renderApp } from "../../test/utils";

const admin: User = { username: "ada", role: "admin" };
const operator: User = { username: "olga", role: "operator" };
const viewer: User = { username: "vic", role: "viewer" };
const ns = namespace("orders", { placement: [] });

const billing: SubscriptionRow = {
  name: "billing",
  initial: "earliest",
  created_at: "2024-05-01T12:00:00Z",
  backlog: [
    { shard: 0, cursor: 4, end_offset: 9, messages: 4, live_messages: 3, bytes: 400, age_ms: 90_000 },
    { shard: 1, cursor: 1, end_offset: 2, messages: 0, live_messages: 0, bytes: 0, age_ms: 0 },
  ],
  messages: 4,
  live_messages: 3,
  bytes: 400,
  age_ms: 90_000,
};

const routes = (user: User, extra: Record<string, unknown> = {}) => ({
  "GET /api/auth/me": user,
  "GET /api/namespaces/orders/": ns,
  "GET /api/namespaces/orders/subscriptions": { results: [billing], node_error: "" },
  ...extra,
});

beforeEach(() => {
  clearCookies();
  resetCsrfToken();
  document.cookie = "csrftoken=tok; path=/";
});

describe("subscriptions tab", () => {
  it("shows backlog per subscription and per shard", async () => {
    mockFetch(routes(viewer));
    renderApp("/namespaces/orders?tab=subscriptions");
    expect((await screen.findByTestId("subscription-messages-billing")).textContent).toBe("4");
    expect(screen.getByTestId("subscription-live-billing").textContent).toBe("3");
    expect(screen.getByTestId("subscription-age-billing").textContent).toBe("1m 30s");
    expect(screen.getByTestId("subscription-row-billing").textContent).toContain("400 B");
    fireEvent.click(screen.getByTestId("subscription-expand-billing"));
    const shard0 = screen.getByTestId("subscription-shard-billing-0").textContent ?? "";
    expect(shard0).toContain("4"); // cursor
    expect(shard0).toContain("9"); // end offset
    // Viewers see no way to change anything.
    expect(screen.queryByTestId("subscription-cursor-billing")).toBeNull();
    expect(screen.queryByTestId("subscription-delete-billing")).toBeNull();
    expect(screen.queryByTestId("subscription-create")).toBeNull();
  });

  it("an operator resets a cursor to earliest on one shard, after typing its name", async () => {
    const fetch = mockFetch(
      routes(operator, {
        "POST /api/namespaces/orders/subscriptions/billing/cursor": () =>
          jsonResponse({ action: "earliest", moves: [{ shard: 0, before: 4, after: -1 }], subscription: { ...billing, messages: 9 } }),
      }),
    );
    renderApp("/namespaces/orders?tab=subscriptions");
    fireEvent.click(await screen.findByTestId("subscription-cursor-billing"));
    fireEvent.change(screen.getByTestId("cursor-shard"), { target: { value: "0" } });
    const submit = screen.getByTestId("confirm-submit") as HTMLButtonElement;
    expect(submit.disabled).toBe(true);
    fireEvent.change(screen.getByTestId("confirm-input"), { target: { value: "billing" } });
    expect(submit.disabled).toBe(false);
    fireEvent.click(submit);
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor").length).toBe(1));
    expect(body(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor")[0]!)).toEqual({
      action: "earliest",
      shard: 0,
      confirm: "billing",
    });
    const result = (await screen.findByTestId("cursor-result")).textContent ?? "";
    expect(result).toContain("shard 0: 4 → -1");
    expect(result).toContain("9 messages");
  });

  it("skip needs a count and time needs a time; the server's refusal is shown at its field", async () => {
    const fetch = mockFetch(
      routes(operator, {
        "POST /api/namespaces/orders/subscriptions/billing/cursor": () => jsonResponse({ count: ["must be an integer from 1 to 4611686018427387904, written in ASCII digits"] }, 400),
      }),
    );
    renderApp("/namespaces/orders?tab=subscriptions");
    fireEvent.click(await screen.findByTestId("subscription-cursor-billing"));
    fireEvent.change(screen.getByTestId("cursor-action"), { target: { value: "skip" } });
    fireEvent.change(screen.getByTestId("confirm-input"), { target: { value: "billing" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    expect((await screen.findByTestId("cursor-error-count")).textContent).toMatch(/whole number/);
    expect(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor")).toHaveLength(0);
    fireEvent.change(screen.getByTestId("cursor-count"), { target: { value: "99999999999999999999" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    expect((await screen.findByTestId("cursor-error-count")).textContent).toMatch(/an integer from 1 to 4611686018427387904/);
    // Sent as typed, digit for digit: as a JS number it would have been 100000000000000000000.
    expect(body(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor")[0]!).count).toBe("99999999999999999999");
    fireEvent.change(screen.getByTestId("cursor-action"), { target: { value: "time" } });
    fireEvent.change(screen.getByTestId("confirm-input"), { target: { value: "billing" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    expect((await screen.findByTestId("cursor-error-timestamp")).textContent).toMatch(/date and time/);
    fireEvent.change(screen.getByTestId("cursor-time"), { target: { value: "2024-05-01T12:00" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor")).toHaveLength(2));
    const sent = body(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions/billing/cursor")[1]!);
    expect(sent).toEqual({ action: "time", timestamp: Date.parse(new Date("2024-05-01T12:00").toISOString()), confirm: "billing" });
  });

  it("every field of the cursor form has its label, choices and error line", async () => {
    mockFetch(
      routes(operator, {
        "POST /api/namespaces/orders/subscriptions/billing/cursor": () => jsonResponse({ shard: ["no shard 1 on this node"] }, 400),
      }),
    );
    renderApp("/namespaces/orders?tab=subscriptions");
    fireEvent.click(await screen.findByTestId("subscription-cursor-billing"));
    const options = (testId: string) => Array.from((screen.getByTestId(testId) as HTMLSelectElement).options).map((o) => [o.value, o.text]);
    expect(options("cursor-action")).toEqual([
      ["earliest", "Reset to earliest"],
      ["latest", "Reset to latest"],
      ["time", "Reset to a time"],
      ["skip", "Skip messages"],
      ["clear", "Clear backlog"],
    ]);
    expect(options("cursor-shard")).toEqual([
      ["", "every shard"],
      ["0", "shard 0"],
      ["1", "shard 1"],
    ]);
    expect(screen.getByLabelText("Shards")).toBe(screen.getByTestId("cursor-shard"));
    fireEvent.change(screen.getByTestId("cursor-action"), { target: { value: "skip" } });
    expect(screen.getByLabelText("Messages per shard")).toBe(screen.getByTestId("cursor-count"));
    fireEvent.change(screen.getByTestId("cursor-shard"), { target: { value: "1" } });
    expect(screen.getByText("Skip messages: billing, shard 1")).toBeTruthy();
    fireEvent.change(screen.getByTestId("cursor-count"), { target: { value: "2" } });
    fireEvent.change(screen.getByTestId("confirm-input"), { target: { value: "billing" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    // The server's refusal is shown under its field, which the control is described by.
    const shard = screen.getByTestId("cursor-shard");
    await waitFor(() => expect(shard.getAttribute("aria-describedby")).toBe("cursor-shard-error"));
    expect(document.getElementById("cursor-shard-error")!.textContent).toBe("no shard 1 on this node");
    expect(screen.getByTestId("cursor-count").getAttribute("aria-describedby")).toBeNull();
  });

  it("an admin creates and deletes a subscription", async () => {
    const fetch = mockFetch(
      routes(admin, {
        "POST /api/namespaces/orders/subscriptions": (_url: string, init: RequestInit) =>
          JSON.parse(String(init.body)).name === "billing"
            ? jsonResponse({ name: ["a subscription with this name already exists"] }, 400)
            : jsonResponse({ ...billing, name: "audit", backlog: null }, 201),
        "DELETE /api/namespaces/orders/subscriptions/billing": () => new Response(null, { status: 204 }),
      }),
    );
    renderApp("/namespaces/orders?tab=subscriptions");
    fireEvent.change(await screen.findByTestId("subscription-create-name"), { target: { value: "billing" } });
    fireEvent.click(screen.getByTestId("subscription-create-submit"));
    expect((await screen.findByTestId("subscription-create-error")).textContent).toContain("already exists");
    fireEvent.change(screen.getByTestId("subscription-create-name"), { target: { value: "audit" } });
    fireEvent.change(screen.getByTestId("subscription-create-initial"), { target: { value: "latest" } });
    fireEvent.click(screen.getByTestId("subscription-create-submit"));
    await waitFor(() => expect(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions")).toHaveLength(2));
    expect(body(callsTo(fetch, "POST", "/api/namespaces/orders/subscriptions")[1]!)).toEqual({ name: "audit", initial: "latest" });
    fireEvent.click(screen.getByTestId("subscription-delete-billing"));
    fireEvent.change(screen.getByTestId("confirm-input"), { target: { value: "billing" } });
    fireEvent.click(screen.getByTestId("confirm-submit"));
    await waitFor(() => expect(callsTo(fetch, "DELETE", "/api/namespaces/orders/subscriptions/billing")).toHaveLength(1));
    expect(body(callsTo(fetch, "DELETE", "/api/namespaces/orders/subscriptions/billing")[0]!)).toEqual({ confirm: "billing" });
  });
});

describe("produce tab", () => {
  it("an operator produces a test message and sees where it landed", async () => {
    let posts = 0;
    const fetch = mockFetch(
      routes(operator, {
        "POST /api/namespaces/orders/messages": () =>
          posts++ === 0
            ? jsonResponse({ key: ["is required: the namespace's cleanup_policy includes compact"] }, 400)
            : jsonResponse({ shard: 1, offset: 42, node: "node-1" }, 201),
      }),
    );
    renderApp("/namespaces/orders?tab=produce");
    fireEvent.change(await screen.findByTestId("produce-value"), { target: { value: "hello" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect((await screen.findByTestId("produce-error-key")).textContent).toContain("cleanup_policy includes compact");
    fireEvent.change(screen.getByTestId("produce-key"), { target: { value: "order-7" } });
    fireEvent.change(screen.getByTestId("produce-tags"), { target: { value: "red, blue" } });
    fireEvent.change(screen.getByTestId("produce-headers"), { target: { value: "trace: t-1\nsource: console" } });
    fireEvent.change(screen.getByTestId("produce-ttl"), { target: { value: "1h" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    const result = await screen.findByTestId("produce-result");
    expect(result.textContent).toContain("shard 1 at offset 42");
    expect(screen.getByTestId("produce-result-link").getAttribute("href")).toBe("/messages?namespace=orders&shard=1&offset=42");
    expect(body(callsTo(fetch, "POST", "/api/namespaces/orders/messages")[1]!)).toEqual({
      key: "order-7",
      value: "hello",
      tags: ["red", "blue"],
      headers: { trace: "t-1", source: "console" },
      ttl_ms: 3_600_000,
    });
  });

  it("checks the form before sending, and needs an operator", async () => {
    const fetch = mockFetch(routes(operator));
    renderApp("/namespaces/orders?tab=produce");
    fireEvent.click(await screen.findByTestId("produce-tombstone"));
    fireEvent.change(screen.getByTestId("produce-headers"), { target: { value: "no colon here" } });
    fireEvent.change(screen.getByTestId("produce-ttl"), { target: { value: "soon" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect((await screen.findByTestId("produce-error-value")).textContent).toContain("needs a key");
    expect(screen.getByTestId("produce-error-headers").textContent).toContain("Line 1");
    expect(screen.getByTestId("produce-error-ttl_ms")).toBeTruthy();
    expect(callsTo(fetch, "POST", "/api/namespaces/orders/messages")).toHaveLength(0);
  });

  it("a new attempt's errors never stand beside the last record's success", async () => {
    let posts = 0;
    mockFetch(
      routes(operator, {
        "POST /api/namespaces/orders/messages": () =>
          ++posts < 3 ? jsonResponse({ shard: 0, offset: 6 + posts, node: "node-1" }, 201) : jsonResponse({ ttl_ms: ["must be at least 1 ms"] }, 400),
      }),
    );
    renderApp("/namespaces/orders?tab=produce");
    fireEvent.change(await screen.findByTestId("produce-value"), { target: { value: "hello" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect((await screen.findByTestId("produce-result")).textContent).toContain("offset 7");
    // Refused in the form: the success goes with it.
    fireEvent.change(screen.getByTestId("produce-ttl"), { target: { value: "soon" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect(await screen.findByTestId("produce-error-ttl_ms")).toBeTruthy();
    expect(screen.queryByTestId("produce-result")).toBeNull();
    // Succeeds again, then refused by the server: the error replaces the success.
    fireEvent.change(screen.getByTestId("produce-ttl"), { target: { value: "" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect((await screen.findByTestId("produce-result")).textContent).toContain("offset 8");
    expect(screen.queryByTestId("produce-error-ttl_ms")).toBeNull();
    fireEvent.change(screen.getByTestId("produce-ttl"), { target: { value: "1h" } });
    fireEvent.click(screen.getByTestId("produce-submit"));
    expect((await screen.findByTestId("produce-error-ttl_ms")).textContent).toBe("must be at least 1 ms");
    expect(screen.queryByTestId("produce-result")).toBeNull();
  });

  it("viewers get no form", async () => {
    mockFetch(routes(viewer));
    renderApp("/namespaces/orders?tab=produce");
    expect(await screen.findByText(/needs the operator role/)).toBeTruthy();
    expect(screen.queryByTestId("produce-form")).toBeNull();
  });
});
