"""Tiered storage (DESIGN §3 "Tiers"): sealed segments offloaded to an object store, read back
transparently. One module per thing in the object store or one rule:

- :mod:`.store` — the object store behind one small interface (``obstore``: ``file://``, ``s3://``);
- :mod:`.layout` — the names of a segment's objects;
- :mod:`.manifest` — the per-segment manifest (reading an object without RocksDB);
- :mod:`.checksum` — the content checksum of a data object (XXH3-128);
- :mod:`.rules` — which segments are offloaded, which local copies go (local retention);
- :mod:`.upload` — uploading and verifying one segment;
- :mod:`.offload` — the ``offload`` lifecycle step;
- :mod:`.rewrite` — compaction and reclamation rewrites of offloaded segments;
- :mod:`.recall` — the ``recall`` lifecycle step (local copies of offloaded segments brought back);
- :mod:`.remote_reads` — ranged reads through a bounded on-disk cache, a segment served remotely;
- :mod:`.context` — one engine's tier and each shard's part of it;
- :mod:`.verify` — what ``verify`` checks in the object store.

The segment states (local, uploading, both, remote) and their changes are
:mod:`storage_engine.segment.tiered_log`; the design, the crash-safety protocol and what is not
done yet are in ``docs/tiered-storage.md``.

May import :mod:`storage_engine.segment` (segment metadata, files and tier states),
:mod:`storage_engine.lifecycle`, :mod:`storage_engine.rules`, :mod:`storage_engine.formats` and the
contract; its errors (:class:`~storage_engine.errors.TierError`,
:class:`~storage_engine.errors.ObjectMissingError`) live in :mod:`storage_engine.errors`, so the lifecycle
parts and compaction catch them without importing this package. Only
:mod:`storage_engine.adapters.segment` (and the benches) compose it. Replication
(``storage_engine/replication/``, to come) goes beside this package, on the same terms.
"""
