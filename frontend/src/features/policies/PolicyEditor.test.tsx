// @vitest-environment jsdom
import { fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { ApiError, GENERIC_FIELD_MESSAGE } from "../../api/client";
import type { PolicyChangeRequest, PolicyField, PolicyView } from "../../api/types";
import { PolicyEditor } from "./PolicyEditor";

const DAY = 86_400_000;
const field = (extra: Partial<PolicyField>): PolicyField => ({
  value: 0,
  source: "builtin",
  overridden: false,
  default: 0,
  group: "expiry",
  unit: "count",
  nullable: false,
  choices: [],
  help: "help text",
  ...extra,
});

const view = (extra: Partial<PolicyView> = {}): PolicyView => ({
  fields: {
    ttl_ms: field({ unit: "ms", nullable: true, value: DAY, source: "namespace", overridden: true, default: null }),
    retention_ms: field({ unit: "ms", nullable: true, value: 7 * DAY, source: "cluster", default: 7 * DAY, group: "retention" }),
    retention_bytes: field({ unit: "bytes", nullable: true, value: null, source: "builtin", default: null, group: "retention" }),
    min_compaction_lag_ms: field({ unit: "ms", value: 0, group: "compaction", default: 0 }),
    max_compaction_lag_ms: field({ unit: "ms", nullable: true, value: null, group: "compaction", default: null }),
    min_cleanable_dirty_ratio: field({ unit: "ratio", value: 0.5, group: "compaction", default: 0.5 }),
    cleanup_policy: field({ unit: "choice", value: "delete", choices: ["delete", "compact", "compact,delete"], group: "retention", default: "delete" }),
  },
  ...extra,
});

type Save = (change: PolicyChangeRequest) => Promise<unknown>;

function setup(opts: { v?: PolicyView; canEdit?: boolean; onSave?: ReturnType<typeof vi.fn<Save>> } = {}) {
  const onSave = opts.onSave ?? vi.fn<Save>(async () => undefined);
  render(<PolicyEditor view={opts.v ?? view()} scopeKind="namespace" canEdit={opts.canEdit ?? true} onSave={onSave} />);
  return { onSave };
}

describe("PolicyEditor", () => {
  it("shows effective values in human units with their source", () => {
    setup();
    expect(screen.getByTestId("policy-field-ttl_ms-value").textContent).toBe("1d");
    expect(screen.getByTestId("policy-field-ttl_ms-source").textContent).toBe("namespace");
    expect(screen.getByTestId("policy-field-retention_ms-source").textContent).toBe("cluster");
    expect(screen.getByTestId("policy-field-retention_bytes-value").textContent).toBe("infinite");
    expect(screen.getByTestId("policy-field-min_cleanable_dirty_ratio-value").textContent).toBe("50%");
    // Inherited fields are not editable until overridden.
    expect((screen.getByTestId("policy-field-retention_ms") as HTMLInputElement).disabled).toBe(true);
    expect((screen.getByTestId("policy-field-ttl_ms") as HTMLInputElement).value).toBe("1d");
    // Groups are shown as fieldsets.
    expect(within(screen.getByTestId("policy-group-compaction")).getByTestId("policy-row-min_compaction_lag_ms")).toBeTruthy();
    expect(screen.queryByTestId("policy-diff")).toBeNull();
  });

  it("previews the diff before saving and sends base units", async () => {
    const { onSave } = setup();
    fireEvent.click(screen.getByTestId("policy-field-retention_ms-override"));
    const input = screen.getByTestId("policy-field-retention_ms") as HTMLInputElement;
    expect(input.disabled).toBe(false);
    fireEvent.change(input, { target: { value: "3d 12h" } });
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "2h" } });

    const diff = screen.getByTestId("policy-diff");
    const retRow = within(diff).getByTestId("policy-diff-retention_ms");
    expect(retRow.textContent).toContain("7d");
    expect(retRow.textContent).toContain("(cluster)");
    expect(retRow.textContent).toContain("3d 12h");
    expect(within(diff).getByTestId("policy-diff-ttl_ms").textContent).toMatch(/1d.*2h/);
    expect(screen.getByTestId("policy-save").textContent).toBe("Save 2 changes");
    expect(onSave).not.toHaveBeenCalled();

    fireEvent.click(screen.getByTestId("policy-save"));
    await screen.findByTestId("policy-saved");
    expect(onSave).toHaveBeenCalledWith({ set: { ttl_ms: 2 * 3_600_000, retention_ms: 3.5 * DAY }, reset: [] });
    expect(screen.queryByTestId("policy-diff")).toBeNull();
  });

  it("shows API field errors inline next to the field", async () => {
    const onSave = vi.fn<Save>(async () => {
      throw new ApiError(400, GENERIC_FIELD_MESSAGE, { min_compaction_lag_ms: ["must be ≤ max_compaction_lag_ms"] });
    });
    setup({ onSave });
    fireEvent.click(screen.getByTestId("policy-field-min_compaction_lag_ms-override"));
    fireEvent.change(screen.getByTestId("policy-field-min_compaction_lag_ms"), { target: { value: "2d" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    const err = await screen.findByTestId("policy-error-min_compaction_lag_ms");
    expect(err.textContent).toBe("must be ≤ max_compaction_lag_ms");
    expect(screen.getByTestId("policy-field-min_compaction_lag_ms").getAttribute("aria-invalid")).toBe("true");
    // The draft is kept so the user can fix it; editing clears the stale server error.
    expect(screen.getByTestId("policy-diff")).toBeTruthy();
    fireEvent.change(screen.getByTestId("policy-field-min_compaction_lag_ms"), { target: { value: "1h" } });
    expect(screen.queryByTestId("policy-error-min_compaction_lag_ms")).toBeNull();
  });

  it("a refused save shows its error, never the last save's success beside it", async () => {
    let calls = 0;
    const onSave = vi.fn<Save>(async () => {
      if (calls++ > 0) throw new ApiError(400, GENERIC_FIELD_MESSAGE, { ttl_ms: ["must be at least 1 ms"] });
    });
    setup({ onSave });
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "2h" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    expect((await screen.findByTestId("policy-saved")).textContent).toBe("Saved 1 change.");
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "3h" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    expect((await screen.findByTestId("policy-error-ttl_ms")).textContent).toBe("must be at least 1 ms");
    expect(screen.queryByTestId("policy-saved")).toBeNull();
  });

  it("shows server errors for unknown fields and details at form level", async () => {
    const onSave = vi.fn<Save>(async () => {
      throw new ApiError(400, GENERIC_FIELD_MESSAGE, { bogus: ["unknown field"] });
    });
    setup({ onSave });
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "3h" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    expect((await screen.findByTestId("policy-error")).textContent).toContain("bogus: unknown field");
  });

  it("validates typed text locally and blocks saving", () => {
    const { onSave } = setup();
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "7" } });
    expect(screen.getByTestId("policy-error-ttl_ms").textContent).toMatch(/Add a unit/);
    expect((screen.getByTestId("policy-save") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("policy-save"));
    expect(onSave).not.toHaveBeenCalled();
  });

  it("resets an override to the inherited value", async () => {
    const { onSave } = setup();
    fireEvent.click(screen.getByTestId("policy-field-ttl_ms-reset"));
    const row = within(screen.getByTestId("policy-diff")).getByTestId("policy-diff-ttl_ms");
    expect(row.textContent).toContain("inherited");
    expect((screen.getByTestId("policy-field-ttl_ms") as HTMLInputElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("policy-save"));
    await waitFor(() => expect(onSave).toHaveBeenCalledWith({ set: {}, reset: ["ttl_ms"] }));
  });

  it("sets a nullable field to infinite with the toggle", async () => {
    const { onSave } = setup();
    const toggle = screen.getByTestId("policy-field-ttl_ms-infinite") as HTMLInputElement;
    expect(toggle.checked).toBe(false);
    fireEvent.click(toggle);
    const input = screen.getByTestId("policy-field-ttl_ms") as HTMLInputElement;
    expect(input.disabled).toBe(true);
    expect(input.value).toBe("infinite");
    expect(within(screen.getByTestId("policy-diff-ttl_ms")).getByText("infinite")).toBeTruthy();
    fireEvent.click(screen.getByTestId("policy-save"));
    await waitFor(() => expect(onSave).toHaveBeenCalledWith({ set: { ttl_ms: null }, reset: [] }));
  });

  it("turns infinite off again into a finite value", async () => {
    const { onSave } = setup();
    fireEvent.click(screen.getByTestId("policy-field-retention_bytes-override"));
    const toggle = screen.getByTestId("policy-field-retention_bytes-infinite") as HTMLInputElement;
    expect(toggle.checked).toBe(true);
    fireEvent.click(toggle);
    fireEvent.change(screen.getByTestId("policy-field-retention_bytes"), { target: { value: "10 GiB" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    await waitFor(() => expect(onSave).toHaveBeenCalledWith({ set: { retention_bytes: 10 * 1024 ** 3 }, reset: [] }));
  });

  it("discards drafts", () => {
    setup();
    fireEvent.change(screen.getByTestId("policy-field-ttl_ms"), { target: { value: "3h" } });
    fireEvent.click(screen.getByTestId("policy-discard"));
    expect(screen.queryByTestId("policy-diff")).toBeNull();
    expect((screen.getByTestId("policy-field-ttl_ms") as HTMLInputElement).value).toBe("1d");
  });

  it("shows the pending banner with the node's error", () => {
    setup({ v: view({ sync_state: "pending", sync_error: "node unreachable" }) });
    const banner = screen.getByTestId("policy-pending");
    expect(banner.textContent).toMatch(/node has not taken the change yet/);
    expect(banner.textContent).toContain("node unreachable");
  });

  it("is read-only without the admin role", () => {
    setup({ canEdit: false });
    expect(screen.getByTestId("policy-readonly")).toBeTruthy();
    expect(screen.queryByTestId("policy-field-ttl_ms-override")).toBeNull();
    expect((screen.getByTestId("policy-field-ttl_ms") as HTMLInputElement).disabled).toBe(true);
  });

  it("shows the tiered-storage fields with their sources, and what an unset local retention means", async () => {
    const tiered = view({
      fields: {
        retention_ms: field({ unit: "ms", nullable: true, value: 7 * DAY, source: "cluster", default: 7 * DAY, group: "retention" }),
        remote_storage_enabled: field({ unit: "bool", value: true, source: "namespace", overridden: true, default: false, group: "retention" }),
        local_retention_ms: field({ unit: "ms", nullable: true, value: null, source: "builtin", default: null, group: "retention" }),
        local_retention_bytes: field({ unit: "bytes", nullable: true, value: 1024 ** 3, source: "cluster", default: null, group: "retention" }),
      },
    });
    const { onSave } = setup({ v: tiered });
    expect(screen.getByTestId("policy-field-remote_storage_enabled-value").textContent).toBe("on");
    expect(screen.getByTestId("policy-field-remote_storage_enabled-source").textContent).toBe("namespace");
    // Unset, a local retention follows the total one: not "infinite".
    expect(screen.getByTestId("policy-field-local_retention_ms-value").textContent).toBe("as retention_ms");
    expect(screen.getByTestId("policy-field-local_retention_ms-source").textContent).toBe("built-in");
    expect(screen.getByTestId("policy-field-local_retention_bytes-value").textContent).toBe("1 GiB");
    expect(screen.getByTestId("policy-field-local_retention_bytes-source").textContent).toBe("cluster");
    fireEvent.click(screen.getByTestId("policy-field-local_retention_ms-override"));
    fireEvent.click(screen.getByTestId("policy-field-local_retention_ms-infinite"));
    fireEvent.change(screen.getByTestId("policy-field-local_retention_ms"), { target: { value: "1d" } });
    fireEvent.change(screen.getByTestId("policy-field-remote_storage_enabled"), { target: { value: "false" } });
    fireEvent.click(screen.getByTestId("policy-save"));
    await screen.findByTestId("policy-saved");
    expect(onSave).toHaveBeenCalledWith({ set: { local_retention_ms: DAY, remote_storage_enabled: false }, reset: [] });
  });

  it("shows the expired-share roll as a percentage, and its null as off", () => {
    const expiry = view({
      fields: {
        segment_expired_roll_ratio: field({ unit: "ratio", nullable: true, value: 0.5, default: 0.5, group: "expiry" }),
        reclaim_dead_ratio: field({ unit: "ratio", value: 0.5, default: 0.5, group: "expiry" }),
      },
    });
    const { rerender } = render(<PolicyEditor view={expiry} scopeKind="namespace" canEdit onSave={vi.fn<Save>(async () => undefined)} />);
    expect(screen.getByTestId("policy-field-segment_expired_roll_ratio-value").textContent).toBe("50%");
    expect(screen.getByTestId("policy-field-segment_expired_roll_ratio-infinite").parentElement?.textContent).toBe("off");
    const off = view({
      fields: {
        segment_expired_roll_ratio: field({ unit: "ratio", nullable: true, value: null, source: "namespace", overridden: true, default: 0.5, group: "expiry" }),
      },
    });
    rerender(<PolicyEditor view={off} scopeKind="namespace" canEdit onSave={vi.fn<Save>(async () => undefined)} />);
    expect(screen.getByTestId("policy-field-segment_expired_roll_ratio-value").textContent).toBe("off");
  });

  it("shows the node's tier fields (cache, offload bandwidth and concurrency)", () => {
    const node = view({
      fields: {
        tier_cache_bytes: field({ unit: "bytes", value: 256 * 1024 ** 2, default: 256 * 1024 ** 2, group: "disk" }),
        offload_bandwidth_bytes_per_s: field({ unit: "bytes", nullable: true, value: null, default: null, group: "pacing" }),
        offload_concurrency: field({ unit: "count", value: 4, source: "node", overridden: true, default: 2, group: "pacing" }),
      },
    });
    render(<PolicyEditor view={node} scopeKind="node" canEdit onSave={vi.fn<Save>(async () => undefined)} />);
    expect(screen.getByTestId("policy-field-tier_cache_bytes-value").textContent).toBe("256 MiB");
    expect(screen.getByTestId("policy-field-offload_bandwidth_bytes_per_s-value").textContent).toBe("unlimited");
    expect(screen.getByTestId("policy-field-offload_concurrency-value").textContent).toBe("4");
    expect(screen.getByTestId("policy-field-offload_concurrency-source").textContent).toBe("node");
    expect(within(screen.getByTestId("policy-group-pacing")).getByTestId("policy-row-offload_concurrency")).toBeTruthy();
  });
});
