"""The lifecycle rules, one rule per module, decided from metadata and the clock (DESIGN §3).

- :mod:`.expiry` — when a record expires (effective expiry, segment deadlines);
- :mod:`.reads` — the read semantics of the contract (bounds, progress, TTL visibility);
- :mod:`.retention` — which segments Kafka retention deletes;
- :mod:`.cleaning` — RocketMQ file cleaning and the disk watermarks;
- :mod:`.rolling` — when an active segment rolls (size, age, idle, expired share);
- :mod:`.pacing` — per-node token buckets that pace lifecycle work;
- :mod:`.due` — when lifecycle work next falls due on a node;
- :mod:`.figures` — the expired figures of a segment;
- :mod:`.work` — what a lifecycle step did to a shard, or would do (dry runs);
- :mod:`.validation` — argument validation, the same field and rule named by every adapter.

A rule module may import the contract (:mod:`storage_engine.api`, :mod:`storage_engine.model`,
:mod:`storage_engine.errors`, :mod:`storage_engine.clock`), :mod:`storage_engine.policies` and other
rule modules — never a store, the lifecycle parts or the node. Everything above uses them.
"""
