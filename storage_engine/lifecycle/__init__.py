"""The lifecycle of stored data (DESIGN §3), as named parts over typed shards.

The engine (:class:`storage_engine.engine.Engine`) is composed of these parts; each
decides *what* to do from the rule modules (:mod:`storage_engine.rules.expiry`,
:mod:`storage_engine.rules.retention`, :mod:`storage_engine.rules.cleaning`,
:mod:`storage_engine.rules.rolling`, :mod:`storage_engine.rules.pacing`) and asks the store's shards
(:class:`LifecycleShard`) to do it:

==========================  ==========================================================
module                      part
==========================  ==========================================================
``shards``                  the store side (:class:`LifecycleShard`, removal rules, TTL
                            entries) and the engine side (:class:`ShardSource`)
``runtime``                 what the parts share: node policy, pacing, counters, the
                            ops lock, the steps every part takes the same way
``disk_guard``              disk-full flag and measurement (watermarks)
``read_checks``             layer 1: the read-time clean-up queue and its worker
``scanner``                 layer 2: the TTL-index scan
``reclaimer``               layer 3: dropping and rewriting expired/dead segments
``retainer``                Kafka retention by age and size
``cleaner``                 RocketMQ file cleaning with watermarks and forced deletes
``sweeps``                  node-wide passes over every namespace, resumable
``due_sweeps``              deadline-driven sweeps (next due time, due shards only)
``verify``                  index/data agreement rules and the namespace report
``parts``                   :class:`~storage_engine.lifecycle.parts.LifecycleParts`,
                            the parts wired together for one engine
``counters``                thread-safe engine counters, shared by every part of an adapter
==========================  ==========================================================

Key compaction (the log cleaner) is :mod:`storage_engine.compaction`; subscriptions
(TTL and backlog quotas) :mod:`storage_engine.subscriptions`.

This module names what a store implements and uses (the shard protocol, removal rules,
TTL entries, the verification rules), so a store imports them from one place.

May import :mod:`storage_engine.rules`, :mod:`storage_engine.formats`, :mod:`storage_engine.policies` and
the contract (``api``, ``config``, ``errors``, ``clock``) — never a store, the tier, compaction or the engine.
"""

from storage_engine.lifecycle.shards import (
    KEEP,
    REMOVE,
    SUPERSEDED,
    TTL_UNKNOWN,
    LifecycleShard,
    Removal,
    RemovalRule,
    ShardSource,
    TTLEntry,
    removal_rule,
)
from storage_engine.lifecycle.verify import MAX_PROBLEMS, check_indexes, verify_shards
from storage_engine.rules.work import ShardWork

__all__ = [
    "KEEP",
    "MAX_PROBLEMS",
    "REMOVE",
    "SUPERSEDED",
    "TTL_UNKNOWN",
    "LifecycleShard",
    "Removal",
    "RemovalRule",
    "ShardSource",
    "ShardWork",
    "TTLEntry",
    "check_indexes",
    "removal_rule",
    "verify_shards",
]
