"""Engine-wide configuration, with every default in one place."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from storage_engine.policies.policy import NodePolicy


class Durability(enum.StrEnum):
    """When an append is acknowledged.

    - ``fsync`` (default): after the batch's bytes are fsynced; acknowledged
      means on disk.
    - ``interval``: after the write; an fsync happens at most every
      ``fsync_interval_ms``; a crash can lose up to that window.
    - ``none``: after the write; the OS decides when data reaches the disk.
    """

    FSYNC = "fsync"
    INTERVAL = "interval"
    NONE = "none"


ADAPTERS = ("segment", "rocksdb", "memory")


@dataclass(frozen=True)
class EngineConfig:
    data_dir: Path | None = None  # required for segment and rocksdb
    adapter: str = "segment"
    io_workers: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    max_requests_per_batch: int = 256
    durability: Durability = Durability.FSYNC
    fsync_interval_ms: int = 100
    disk_capacity_bytes: int | None = None  # None: use the filesystem's real size
    node_policy: NodePolicy = field(default_factory=NodePolicy)
    # The object-store tier of offloaded segments (``segment`` adapter; storage_engine.tier.store):
    # ``file:///dir`` or ``s3://bucket[/prefix]`` (endpoint and credentials from the environment).
    # None: ``file://<data_dir>-tier``, a directory beside the data directory.
    tier_uri: str | None = None
    # A background thread drains the read-time clean-up queue (DESIGN §3, layer 1);
    # tests turn it off and call drain_read_checks() to be deterministic.
    lifecycle_worker: bool = True
