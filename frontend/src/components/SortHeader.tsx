import type { SortState } from "../lib/table";

/** A sortable column header: a button with aria-sort on the th. */
export function SortHeader<K extends string>({
  label,
  sortKey,
  sort,
  onSort,
  numeric,
}: {
  label: string;
  sortKey: K;
  sort: SortState<K>;
  onSort: (key: K) => void;
  numeric?: boolean;
}) {
  const active = sort.key === sortKey;
  return (
    <th
      scope="col"
      className={numeric ? "num" : undefined}
      aria-sort={active ? (sort.dir === "asc" ? "ascending" : "descending") : "none"}
    >
      <button type="button" className="sort-button" onClick={() => onSort(sortKey)} data-testid={`sort-${sortKey}`}>
        {label}
        <span aria-hidden="true">{active ? (sort.dir === "asc" ? " ▲" : " ▼") : " ↕"}</span>
      </button>
    </th>
  );
}
