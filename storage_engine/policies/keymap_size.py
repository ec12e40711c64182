"""The geometry of compaction's key map (:class:`storage_engine.compaction.keymap.KeyMap`) and the
smallest budget it can honour, in a module of its own: the policy validation
(:mod:`storage_engine.policies.policy`) refuses a node's ``compaction_map_budget_bytes`` below the
same minimum that ``compact(map_budget_bytes=...)`` refuses, and must not import the
compaction module (which imports the policy)."""

from __future__ import annotations

SLOT_BYTES = 16  # one KeyMap slot: 8-byte hash, 4-byte check, 4-byte offset delta
LOAD_FACTOR = 0.9  # entries per slot a map is filled to (as Kafka's dedupe buffer)
BITMAP_SHARE = 32  # 1/32 of the budget is the superseded-offsets bitmap: a round spans ≤ budget/4 offsets
MIN_BITMAP_BYTES = 64  # the bitmap never shrinks below this (a round spans at least 512 offsets)
MIN_MAP_SLOTS = 2  # the smallest table (a prime) that holds a key: int(2 × LOAD_FACTOR) = 1
MIN_MAP_BUDGET_BYTES = MIN_BITMAP_BYTES + MIN_MAP_SLOTS * SLOT_BYTES
"""The smallest key-map budget: a one-key table and the minimal bitmap. A smaller budget is
refused rather than silently enlarged, so the memory a caller grants is never exceeded."""


def bitmap_bytes(budget_bytes: int) -> int:
    """The share of a budget that goes to the superseded-offsets bitmap."""
    return max(MIN_BITMAP_BYTES, budget_bytes // BITMAP_SHARE)
