import type { CursorPage } from "../api/types";

/**
 * Previous / next buttons for a cursor-paginated list. The parent keeps the
 * current page URL; `onPage(url)` moves it to a `next` or `previous` link,
 * `onFirst()` back to the first page.
 */
export function CursorPager<T>({
  page,
  onPage,
  onFirst,
  isFetching,
  atFirst,
  label = "Pages",
}: {
  page: CursorPage<T> | undefined;
  onPage: (url: string) => void;
  onFirst?: () => void;
  isFetching?: boolean;
  atFirst?: boolean;
  label?: string;
}) {
  if (!page) return null;
  return (
    <nav className="pager" aria-label={label}>
      {onFirst && (
        <button type="button" className="button" onClick={onFirst} disabled={atFirst} data-testid="page-first">
          « First
        </button>
      )}
      <button
        type="button"
        className="button"
        onClick={() => page.previous && onPage(page.previous)}
        disabled={!page.previous}
        data-testid="page-prev"
      >
        ‹ Previous
      </button>
      <button
        type="button"
        className="button"
        onClick={() => page.next && onPage(page.next)}
        disabled={!page.next}
        data-testid="page-next"
      >
        Next ›
      </button>
      <span className="muted small" aria-live="polite">
        {page.results.length} row{page.results.length === 1 ? "" : "s"} on this page
        {isFetching ? " · loading…" : ""}
      </span>
    </nav>
  );
}
