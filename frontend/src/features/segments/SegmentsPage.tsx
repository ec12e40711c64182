import { useMemo, useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { useNamespaces } from "../../api/queries";
import { Field } from "../../components/Field";
import { SEGMENT_TIERS, SegmentsList } from "./Segments";
import {
  EMPTY_SEGMENT_FILTERS,
  formFromSearch,
  searchFromForm,
  segmentFilterParams,
  type SegmentFilterForm,
} from "../../lib/filters";
import { usePageTitle } from "../../lib/hooks";

const ORDERINGS: [string, string][] = [
  ["-max_timestamp", "Newest first"],
  ["max_timestamp", "Oldest first"],
  ["-size_bytes", "Largest first"],
  ["size_bytes", "Smallest first"],
  ["-expired_ratio", "Most expired first"],
  ["expired_ratio", "Least expired first"],
];

export default function SegmentsPage() {
  usePageTitle("Segments");
  const [search, setSearch] = useSearchParams();
  const applied = useMemo(() => formFromSearch(search, EMPTY_SEGMENT_FILTERS), [search]);
  const [form, setForm] = useState<SegmentFilterForm>(applied);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const namespaces = useNamespaces();
  // Ages become epoch ms once per applied filter set, so the query key is stable.
  const params = useMemo(() => segmentFilterParams(applied, Date.now()).params, [applied]);

  const set = (key: keyof SegmentFilterForm) => (e: { target: { value: string } }) =>
    setForm((f) => ({ ...f, [key]: e.target.value }));

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const result = segmentFilterParams(form, Date.now());
    setErrors(result.errors);
    if (Object.keys(result.errors).length === 0) setSearch(searchFromForm(form, EMPTY_SEGMENT_FILTERS));
  };
  const onClear = () => {
    setForm(EMPTY_SEGMENT_FILTERS);
    setErrors({});
    setSearch({});
  };
  const invalid = (k: string) => (errors[k] ? { "aria-invalid": true, "aria-describedby": `seg-${k}-error` } : {});

  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Segments</h1>
          <p className="muted">The segment catalog across namespaces, one page at a time.</p>
        </div>
      </div>
      <form className="filters" onSubmit={onSubmit} role="search" aria-label="Segment filters" data-testid="segments-filters">
        <Field id="seg-namespace" label="Namespace">
          <select id="seg-namespace" value={form.namespace} onChange={set("namespace")} data-testid="filter-namespace">
            <option value="">any</option>
            {(namespaces.data?.items ?? []).map((n) => (
              <option key={n.name} value={n.name}>
                {n.name}
              </option>
            ))}
            {form.namespace && !namespaces.data?.items.some((n) => n.name === form.namespace) && (
              <option value={form.namespace}>{form.namespace}</option>
            )}
          </select>
        </Field>
        <Field id="seg-shard" label="Shard" error={errors.shard}>
          <input id="seg-shard" value={form.shard} onChange={set("shard")} inputMode="numeric" placeholder="any" data-testid="filter-shard" {...invalid("shard")} />
        </Field>
        <Field id="seg-state" label="State">
          <select id="seg-state" value={form.state} onChange={set("state")} data-testid="filter-state">
            <option value="">any</option>
            {["active", "sealed", "deleting", "deleted", "offloaded"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </Field>
        <Field id="seg-tier" label="Tier">
          <select id="seg-tier" value={form.tier} onChange={set("tier")} data-testid="filter-tier">
            <option value="">any</option>
            {SEGMENT_TIERS.map(([tier, label]) => (
              <option key={tier} value={tier}>
                {label}
              </option>
            ))}
          </select>
        </Field>
        <Field id="seg-min_size" label="Min size" error={errors.min_size}>
          <input id="seg-min_size" value={form.min_size} onChange={set("min_size")} placeholder="e.g. 64 MiB" data-testid="filter-min-size" {...invalid("min_size")} />
        </Field>
        <Field id="seg-max_size" label="Max size" error={errors.max_size}>
          <input id="seg-max_size" value={form.max_size} onChange={set("max_size")} placeholder="e.g. 1 GiB" data-testid="filter-max-size" {...invalid("max_size")} />
        </Field>
        <Field id="seg-older_than" label="Newest record older than" error={errors.older_than}>
          <input id="seg-older_than" value={form.older_than} onChange={set("older_than")} placeholder="e.g. 7d" data-testid="filter-older-than" {...invalid("older_than")} />
        </Field>
        <Field id="seg-newer_than" label="Newest record within" error={errors.newer_than}>
          <input id="seg-newer_than" value={form.newer_than} onChange={set("newer_than")} placeholder="e.g. 24h" data-testid="filter-newer-than" {...invalid("newer_than")} />
        </Field>
        <Field id="seg-min_expired_ratio" label="Min expired" error={errors.min_expired_ratio}>
          <input
            id="seg-min_expired_ratio"
            value={form.min_expired_ratio}
            onChange={set("min_expired_ratio")}
            placeholder="e.g. 20%"
            data-testid="filter-min-expired"
            {...invalid("min_expired_ratio")}
          />
        </Field>
        <Field id="seg-ordering" label="Order">
          <select id="seg-ordering" value={form.ordering} onChange={set("ordering")} data-testid="filter-ordering">
            {ORDERINGS.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </Field>
        <Field id="seg-page_size" label="Per page">
          <select id="seg-page_size" value={form.page_size} onChange={set("page_size")} data-testid="filter-page-size">
            {["25", "50", "100", "200"].map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </Field>
        <div className="button-row">
          <button type="submit" className="button button-primary" data-testid="filter-apply">
            Apply
          </button>
          <button type="button" className="button" onClick={onClear} data-testid="filter-clear">
            Clear
          </button>
        </div>
      </form>
      <SegmentsList filters={params} />
    </div>
  );
}
