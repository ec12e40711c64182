"""Message storage engine with first-class data lifecycle management.

Entry point: :func:`open_engine`. The contract is :mod:`storage_engine.api`.
This package never imports Django.
"""

from __future__ import annotations

from pathlib import Path

from storage_engine.api import StorageAdapter
from storage_engine.clock import Clock, SystemClock
from storage_engine.config import ADAPTERS, EngineConfig
from storage_engine.errors import InvalidArgumentError


def open_engine(config: EngineConfig, clock: Clock | None = None) -> StorageAdapter:
    """Open the adapter named by ``config.adapter`` on ``config.data_dir``."""
    clock = clock or SystemClock()
    if config.adapter == "memory":
        from storage_engine.adapters.memory import MemoryAdapter

        return MemoryAdapter(config, clock)
    if config.data_dir is None:
        raise InvalidArgumentError("data_dir", f"is required for the {config.adapter!r} adapter")
    Path(config.data_dir).mkdir(parents=True, exist_ok=True)
    if config.adapter == "segment":
        from storage_engine.adapters.segment import SegmentAdapter

        return SegmentAdapter(config, clock)
    if config.adapter == "rocksdb":
        from storage_engine.adapters.rocksdb import RocksDBAdapter

        return RocksDBAdapter(config, clock)
    raise InvalidArgumentError("adapter", f"must be one of {', '.join(ADAPTERS)}")


__all__ = ["EngineConfig", "StorageAdapter", "open_engine"]
