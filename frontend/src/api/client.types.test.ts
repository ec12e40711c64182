// The typed client refuses what the schema does not allow: each line marked @ts-expect-error must not
// compile (tsc fails on a marker whose line compiles), so a path, parameter or body the API does not
// take is a build error, not a 400 or 404 at run time. Nothing here is called.
import { describe, expect, it } from "vitest";
import { api, pageUrl } from "./client";
import type { Namespace, SyncState } from "./types";

function refused() {
  // @ts-expect-error: not a path of the API
  void api("get", "/api/namespace/");
  // @ts-expect-error: POST is not a method of this path
  void api("post", "/api/actions");
  // @ts-expect-error: the path's {name} has no value
  void api("get", "/api/namespaces/{name}/");
  // @ts-expect-error: a namespace is created from a body
  void api("post", "/api/namespaces/");
  // @ts-expect-error: a field the create request does not take
  void api("post", "/api/namespaces/", { body: { name: "a", shard: 1 } });
  // @ts-expect-error: not an action kind of a namespace
  void api("post", "/api/namespaces/{name}/actions", { params: { name: "a" }, body: { action: "file_clean" } });
  // @ts-expect-error: a GET sends no body
  void api("get", "/api/actions", { body: { confirm: "x" } });
  // @ts-expect-error: a filter the alert list does not take
  pageUrl("/api/alerts/", { colour: "red" });
  // @ts-expect-error: not a state of an alert
  pageUrl("/api/alerts/", { state: "burning" });
  // @ts-expect-error: not a paged list
  pageUrl("/api/actions");
}

async function typedAnswers(): Promise<[Namespace, SyncState]> {
  const ns = await api("get", "/api/namespaces/{name}/", { params: { name: "orders" } });
  return [ns, ns.sync_state];
}

describe("typed client", () => {
  it("compiles only calls the schema allows (see the @ts-expect-error lines)", () => {
    expect(typeof refused).toBe("function");
    expect(typeof typedAnswers).toBe("function");
  });
});
