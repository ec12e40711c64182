// The source layout's rules, read from the files themselves:
// - the API client (src/api/client.ts) is the only module that calls `fetch`: every request goes through
//   the generated openapi-fetch client, so a hand-written request function cannot come back;
// - a page never imports another page: page modules (`*Page.tsx`) are imported by the app (src/app/,
//   the router and the page registry) only, never by a page or anything else of a feature.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CLIENT = "api/client.ts";
/** This file, which names what it looks for. */
const SELF = "app/layout.test.ts";

function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|tsx)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [relative(SRC, path)] : [];
  });
}

/** The text without comments, so that a comment naming fetch( does not count. */
function code(file: string): string {
  return readFileSync(join(SRC, file), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
}

/** A call of fetch: `fetch(`, `window.fetch(`, `globalThis.fetch (` — not `refetch(` or `prefetch(`. */
const FETCH_CALL = /(?<![\w$])fetch\s*\(/;

/** The relative modules a file imports (static, dynamic, re-exports and vi.mock), resolved from src/. */
function imports(file: string): string[] {
  const specs = [...code(file).matchAll(/(?:from|import|vi\.mock)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
  return specs.map((spec) => relative(SRC, resolve(SRC, dirname(file), spec)));
}

const isPage = (module: string) => /(^|\/)[A-Z]\w*Page(\.tsx)?$/.test(module);
const featureOf = (file: string) => /^features\/([^/]+)\//.exec(file)?.[1] ?? null;

describe("source layout", () => {
  const files = sources();

  it("finds the sources", () => {
    expect(files).toContain(CLIENT);
    expect(files.filter((f) => isPage(f.replace(/\.tsx$/, ""))).length).toBeGreaterThanOrEqual(10);
  });

  it("has no request function but the API client: no other module calls fetch", () => {
    const offenders = files.filter((f) => f !== CLIENT && f !== SELF && FETCH_CALL.test(code(f)));
    expect(offenders).toEqual([]);
    expect(FETCH_CALL.test("await fetch('/api/x')")).toBe(true);
    expect(FETCH_CALL.test("globalThis.fetch (url)")).toBe(true);
    expect(FETCH_CALL.test("void q.refetch()")).toBe(false);
  });

  it("keeps XMLHttpRequest and the openapi-fetch client out of the rest of the app", () => {
    const offenders = files.filter(
      (f) => f !== CLIENT && f !== SELF && (/XMLHttpRequest/.test(code(f)) || /from\s+["']openapi-fetch["']/.test(code(f))),
    );
    expect(offenders).toEqual([]);
  });

  it("lets only the app import a page: no page (or other feature file) imports a page", () => {
    const offenders = files
      .filter((f) => !f.startsWith("app/"))
      .flatMap((f) => imports(f).filter((m) => isPage(m.replace(/\.tsx$/, ""))).map((m) => `${f} imports ${m}`));
    expect(offenders).toEqual([]);
  });

  it("groups the app by feature: the known features, and no pages/ or auth/ folder beside them", () => {
    // Pages are caught above; this names the features that exist, so a new top-level folder is a decision.
    const features = [...new Set(files.map(featureOf).filter((f): f is string => f !== null))].sort();
    expect(features).toEqual([
      "alerts",
      "audit",
      "auth",
      "messages",
      "namespaces",
      "nodes",
      "overview",
      "policies",
      "reports",
      "runs",
      "segments",
      "subscriptions",
    ]);
    expect(files.filter((f) => f.startsWith("pages/") || f.startsWith("auth/"))).toEqual([]);
  });

  it("the rule would catch a page importing a page", () => {
    const fake = 'import { TimeCell } from "../namespaces/NamespacesPage";\nconst X = lazy(() => import("./OtherPage"));';
    const specs = [...fake.matchAll(/(?:from|import|vi\.mock)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) =>
      relative(SRC, resolve(SRC, "features/nodes", m[1]!)),
    );
    expect(specs.filter(isPage)).toEqual(["features/namespaces/NamespacesPage", "features/nodes/OtherPage"]);
  });
});
