// The generated client refuses what the schema does not allow: each line marked @ts-expect-error must not
// compile (tsc fails on a marker whose line compiles), so a path, parameter or body the API does not
// take is a build error, not a 400 or 404 at run time. Nothing here is called. (openapi-fetch infers the
// options generically, so a surplus key in a body or query is not refused; a missing or mistyped one is.)
import { describe, expect, it } from "vitest";
import { answer, api, pageUrl } from "./client";
import type { Namespace, SyncState } from "./types";

function refused() {
  // @ts-expect-error: not a path of the API
  void api.GET("/api/namespace/");
  // @ts-expect-error: POST is not a method of this path
  void api.POST("/api/actions");
  // @ts-expect-error: the path's {name} has no value
  void api.GET("/api/namespaces/{name}/");
  // @ts-expect-error: a path parameter the path does not have
  void api.GET("/api/namespaces/{name}/", { params: { path: { namespace: "a" } } });
  // @ts-expect-error: a namespace is created from a body
  void api.POST("/api/namespaces/");
  // @ts-expect-error: the create request needs a name
  void api.POST("/api/namespaces/", { body: { shards: 1 } });
  // @ts-expect-error: shards is a number
  void api.POST("/api/namespaces/", { body: { name: "a", shards: "two" } });
  // @ts-expect-error: not an action kind of a namespace
  void api.POST("/api/namespaces/{name}/actions", { params: { path: { name: "a" } }, body: { action: "file_clean" } });
  // @ts-expect-error: a GET sends no body
  void api.GET("/api/actions", { body: { confirm: "x" } });
  // @ts-expect-error: the report's days go in the query, not the body
  void api.GET("/api/namespaces/{name}/reports/lifecycle/summary", { params: { path: { name: "a" } }, body: { days: 7 } });
  // @ts-expect-error: the metric series needs its series
  void api.GET("/api/metrics/series", { params: { query: { range: "1h" } } });
  // @ts-expect-error: not a series of the API
  void api.GET("/api/metrics/series", { params: { query: { series: "disk_used", range: "1h" } } });
  // @ts-expect-error: a filter the alert list does not take
  pageUrl("/api/alerts/", { colour: "red" });
  // @ts-expect-error: not a state of an alert
  pageUrl("/api/alerts/", { state: "burning" });
  // @ts-expect-error: not a paged list
  pageUrl("/api/actions");
}

async function typedAnswers(): Promise<[Namespace, SyncState]> {
  const ns = await answer(api.GET("/api/namespaces/{name}/", { params: { path: { name: "orders" } } }));
  return [ns, ns.sync_state];
}

describe("typed client", () => {
  it("compiles only calls the schema allows (see the @ts-expect-error lines)", () => {
    expect(typeof refused).toBe("function");
    expect(typeof typedAnswers).toBe("function");
  });
});
