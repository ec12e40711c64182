"""The index store's persisted records: a shard's indexing checkpoint and a namespace's record."""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import dataclass, fields

from storage_engine.policies.policy import NamespacePolicy, namespace_policy_recovered

CHECKPOINT_FORMAT = struct.Struct(">BQQQqqQ")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Checkpoint:
    """How far a shard is indexed, and the sparse-index state to continue from.

    Value layout (49 bytes): version u8, next_offset u64 (every offset below is
    indexed), segment_base u64 and position u64 (end of the last indexed batch
    in that segment file), max_timestamp i64 (running maximum, −1 none),
    time_entry_timestamp i64 (of the last ``times`` entry, −1 none),
    bytes_since_entry u64 (since the last ``offsets`` entry).
    """

    next_offset: int = 0
    segment_base: int = 0
    position: int = 0
    max_timestamp: int = -1
    time_entry_timestamp: int = -1
    bytes_since_entry: int = 0

    def pack(self) -> bytes:
        return CHECKPOINT_FORMAT.pack(
            1,
            self.next_offset,
            self.segment_base,
            self.position,
            self.max_timestamp,
            self.time_entry_timestamp,
            self.bytes_since_entry,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> Checkpoint:
        version, *values = CHECKPOINT_FORMAT.unpack(raw)
        if version != 1:
            raise ValueError(f"unsupported checkpoint version {version}")
        return cls(*values)

    def copy(self) -> Checkpoint:
        return Checkpoint(*(getattr(self, f.name) for f in fields(self)))


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    name: str
    ns_id: int
    shards: int
    policy: NamespacePolicy
    created_at: int

    def pack(self) -> bytes:
        body = {"id": self.ns_id, "shards": self.shards, "policy": self.policy.to_dict(), "created_at": self.created_at}
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def unpack(cls, name: str, raw: bytes) -> NamespaceRecord:
        body = json.loads(raw)
        policy, reset = namespace_policy_recovered(body["policy"])
        if reset:
            log.warning("namespace %s: stored policy fields %s break a rule; using their defaults", name, reset)
        return cls(name, body["id"], body["shards"], policy, body["created_at"])
