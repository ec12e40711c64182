// @vitest-environment jsdom
import { act, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { formatRelativeTime } from "./format";
import { RELATIVE_TIME_TICK_MS, useNow } from "./hooks";

const START = Date.UTC(2026, 0, 1, 12, 0, 0);

function Ago({ at, id }: { at: number; id: string }) {
  const now = useNow();
  return <span data-testid={id}>{formatRelativeTime(at, now)}</span>;
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(START);
});
afterEach(() => {
  vi.useRealTimers();
});

describe("relative times", () => {
  it("move on while the page stays open, every row together", () => {
    render(
      <>
        <Ago at={START - 3 * 60_000} id="a" />
        <Ago at={START - 10 * 60_000} id="b" />
      </>,
    );
    expect(screen.getByTestId("a").textContent).toBe("3m ago");
    act(() => void vi.advanceTimersByTime(60_000));
    expect(screen.getByTestId("a").textContent).toBe("4m ago");
    expect(screen.getByTestId("b").textContent).toBe("11m ago");
  });

  it("tick within half a minute on one shared clock", () => {
    expect(RELATIVE_TIME_TICK_MS).toBeGreaterThanOrEqual(15_000);
    expect(RELATIVE_TIME_TICK_MS).toBeLessThanOrEqual(30_000);
    const setInterval = vi.spyOn(window, "setInterval");
    const { unmount } = render(
      <>
        {Array.from({ length: 20 }, (_, i) => (
          <Ago key={i} at={START} id={`row-${i}`} />
        ))}
      </>,
    );
    expect(setInterval).toHaveBeenCalledTimes(1); // twenty rows, one timer
    act(() => void vi.advanceTimersByTime(RELATIVE_TIME_TICK_MS));
    expect(screen.getByTestId("row-7").textContent).toBe("15s ago");
    unmount();
    expect(vi.getTimerCount()).toBe(0); // nobody watches: the clock stops
  });

  it("catch up at once when the tab is shown again", () => {
    render(<Ago at={START} id="a" />);
    vi.setSystemTime(START + 5 * 60_000); // a hidden tab: the timer did not run
    act(() => void document.dispatchEvent(new Event("visibilitychange")));
    expect(screen.getByTestId("a").textContent).toBe("5m ago");
  });
});
