import type { SyncState } from "../../api/types";

/** The badge tone of a namespace's sync state (its policy pushed to the nodes or not). */
export const SYNC_TONE: Record<SyncState, "ok" | "warn" | "fail"> = {
  synced: "ok",
  pending: "warn",
  failed: "fail",
};
