import { useRef, type KeyboardEvent } from "react";

/**
 * A tab list (WAI-ARIA pattern): arrow keys move between tabs, the selected
 * tab is the only one in the tab order. The caller renders the panel with
 * `id={tabPanelId(idPrefix, value)}` and `role="tabpanel"`.
 */
export function Tabs<T extends string>({
  tabs,
  value,
  onChange,
  label,
  idPrefix,
}: {
  tabs: { value: T; label: string }[];
  value: T;
  onChange: (value: T) => void;
  label: string;
  idPrefix: string;
}) {
  const refs = useRef<(HTMLButtonElement | null)[]>([]);
  const onKey = (e: KeyboardEvent, i: number) => {
    let next = -1;
    if (e.key === "ArrowRight") next = (i + 1) % tabs.length;
    else if (e.key === "ArrowLeft") next = (i - 1 + tabs.length) % tabs.length;
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = tabs.length - 1;
    if (next < 0) return;
    e.preventDefault();
    onChange(tabs[next]!.value);
    refs.current[next]?.focus();
  };
  return (
    <div className="tabs" role="tablist" aria-label={label}>
      {tabs.map((t, i) => (
        <button
          key={t.value}
          ref={(el) => {
            refs.current[i] = el;
          }}
          type="button"
          role="tab"
          id={`${idPrefix}-tab-${t.value}`}
          aria-selected={t.value === value}
          aria-controls={tabPanelId(idPrefix, t.value)}
          tabIndex={t.value === value ? 0 : -1}
          className="tab"
          onClick={() => onChange(t.value)}
          onKeyDown={(e) => onKey(e, i)}
          data-testid={`tab-${t.value}`}
        >
          {t.label}
        </button>
      ))}
    </div>
  );
}

export const tabPanelId = (prefix: string, value: string) => `${prefix}-panel-${value}`;
