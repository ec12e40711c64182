import { Fragment, useMemo, useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { errorMessage, pageUrl } from "../../api/client";
import { useCursorPage } from "../../api/queries";
import type { AuditEntry, AuditResult } from "../../api/types";
import { CursorPager } from "../../components/CursorPager";
import { Field } from "../../components/Field";
import { Badge, EmptyState, ErrorState, LoadingState } from "../../components/States";
import { auditDiffRows, formatAuditValue } from "./audit";
import { localInputToIso, formFromSearch, searchFromForm } from "../../lib/filters";
import { formatDateTime, formatRelativeTime } from "../../lib/format";
import { useNow, usePageTitle } from "../../lib/hooks";

const EMPTY = { action: "", actor: "", target_type: "", q: "", result: "", since: "", until: "" };
type AuditForm = typeof EMPTY;

const RESULT_TONE: Record<AuditResult, "ok" | "fail" | "warn"> = { ok: "ok", failed: "fail", denied: "warn" };

export default function AuditPage() {
  usePageTitle("Audit");
  const [search, setSearch] = useSearchParams();
  const applied = useMemo(() => formFromSearch(search, EMPTY), [search]);
  const [form, setForm] = useState<AuditForm>(applied);
  const firstUrl = pageUrl("/api/audit/", {
    action: applied.action.trim(),
    actor: applied.actor.trim(),
    target_type: applied.target_type.trim(),
    q: applied.q.trim(),
    result: applied.result,
    since: localInputToIso(applied.since),
    until: localInputToIso(applied.until),
  });
  const [cursor, setCursor] = useState<{ base: string; url: string } | null>(null);
  const url = cursor && cursor.base === firstUrl ? cursor.url : firstUrl;
  const page = useCursorPage<AuditEntry>("audit", url);

  const set = (k: keyof AuditForm) => (e: { target: { value: string } }) => setForm((f) => ({ ...f, [k]: e.target.value }));
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    setSearch(searchFromForm(form, EMPTY));
  };

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Audit log</h1>
          <p className="muted">Who changed what, when, with the result. Times are in your zone.</p>
        </div>
      </div>
      <form className="filters" onSubmit={onSubmit} role="search" aria-label="Audit filters" data-testid="audit-filters">
        <Field id="audit-q" label="Target contains" wide>
          <input id="audit-q" value={form.q} onChange={set("q")} placeholder="e.g. orders" data-testid="audit-filter-q" />
        </Field>
        <Field id="audit-action" label="Action starts with">
          <input id="audit-action" value={form.action} onChange={set("action")} placeholder="e.g. policy." data-testid="audit-filter-action" />
        </Field>
        <Field id="audit-actor" label="Actor">
          <input id="audit-actor" value={form.actor} onChange={set("actor")} placeholder="username" data-testid="audit-filter-actor" />
        </Field>
        <Field id="audit-target-type" label="Target type">
          <input id="audit-target-type" value={form.target_type} onChange={set("target_type")} placeholder="e.g. namespace" data-testid="audit-filter-target-type" />
        </Field>
        <Field id="audit-result" label="Result">
          <select id="audit-result" value={form.result} onChange={set("result")} data-testid="audit-filter-result">
            <option value="">any</option>
            <option value="ok">ok</option>
            <option value="failed">failed</option>
            <option value="denied">denied</option>
          </select>
        </Field>
        <Field id="audit-since" label="Since">
          <input id="audit-since" type="datetime-local" value={form.since} onChange={set("since")} data-testid="audit-filter-since" />
        </Field>
        <Field id="audit-until" label="Until">
          <input id="audit-until" type="datetime-local" value={form.until} onChange={set("until")} data-testid="audit-filter-until" />
        </Field>
        <div className="button-row">
          <button type="submit" className="button button-primary" data-testid="audit-apply">
            Search
          </button>
          <button
            type="button"
            className="button"
            onClick={() => {
              setForm(EMPTY);
              setSearch({});
            }}
          >
            Clear
          </button>
        </div>
      </form>

      {page.isPending && <LoadingState label="Loading the audit log…" />}
      {page.isError && !page.data && (
        <ErrorState title="Could not load the audit log" error={page.error} onRetry={() => void page.refetch()} retrying={page.isFetching} />
      )}
      {page.isError && page.data && (
        <div className="banner banner-warn" role="alert">
          {errorMessage(page.error)}
        </div>
      )}
      {page.data && (
        <>
          {page.data.results.length === 0 ? (
            <EmptyState title="No audit entries match">Widen the filters or the time range.</EmptyState>
          ) : (
            <AuditTable entries={page.data.results} />
          )}
          <CursorPager
            page={page.data}
            onPage={(u) => setCursor({ base: firstUrl, url: u })}
            onFirst={() => setCursor(null)}
            atFirst={url === firstUrl}
            isFetching={page.isFetching}
            label="Audit pages"
          />
        </>
      )}
    </div>
  );
}

function AuditTable({ entries }: { entries: AuditEntry[] }) {
  const [open, setOpen] = useState<Set<number>>(new Set());
  const now = useNow(30_000);
  const toggle = (id: number) =>
    setOpen((s) => {
      const n = new Set(s);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });
  return (
    <div className="table-wrap">
      <table className="table table-compact" data-testid="audit-table">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Actor</th>
            <th scope="col">Action</th>
            <th scope="col">Target</th>
            <th scope="col">Result</th>
            <th scope="col">Changes</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => {
            const rows = auditDiffRows(e);
            const isOpen = open.has(e.id);
            return (
              <Fragment key={e.id}>
                <tr data-testid={`audit-row-${e.id}`}>
                  <td>
                    <time dateTime={e.at}>{formatDateTime(e.at)}</time>
                    <div className="muted small">{formatRelativeTime(e.at, now)}</div>
                  </td>
                  <td>
                    {e.actor || <span className="muted">system</span>}
                    {e.remote_addr && <div className="muted small mono">{e.remote_addr}</div>}
                  </td>
                  <td className="mono">{e.action}</td>
                  <td>
                    <span className="muted small">{e.target_type}</span> <span className="mono">{e.target}</span>
                  </td>
                  <td>
                    <Badge tone={RESULT_TONE[e.result] ?? "neutral"}>{e.result}</Badge>
                    {e.detail && <div className="small">{e.detail}</div>}
                  </td>
                  <td>
                    {rows.length === 0 ? (
                      <span className="muted">—</span>
                    ) : (
                      <button
                        type="button"
                        className="button button-small"
                        aria-expanded={isOpen}
                        aria-controls={`audit-diff-${e.id}`}
                        onClick={() => toggle(e.id)}
                        data-testid={`audit-expand-${e.id}`}
                      >
                        {isOpen ? "Hide" : "Show"} {rows.length} change{rows.length === 1 ? "" : "s"}
                      </button>
                    )}
                  </td>
                </tr>
                {isOpen && (
                  <tr id={`audit-diff-${e.id}`} data-testid={`audit-diff-${e.id}`}>
                    <td colSpan={6}>
                      <table className="table table-compact">
                        <thead>
                          <tr>
                            <th scope="col">Field</th>
                            <th scope="col">Before</th>
                            <th scope="col">After</th>
                          </tr>
                        </thead>
                        <tbody>
                          {rows.map((r) => (
                            <tr key={r.field}>
                              <th scope="row" className="mono">
                                {r.field}
                              </th>
                              <td className="mono value-cell">{formatAuditValue(r.before)}</td>
                              <td className="mono value-cell">{formatAuditValue(r.after)}</td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
