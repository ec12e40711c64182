"""The :class:`~storage_engine.api.StorageAdapter` implementations: the engine composed over a store.

- :mod:`.memory` — the ``memory`` adapter over :mod:`storage_engine.memory`;
- :mod:`.indexed` — what the ``segment`` and ``rocksdb`` adapters share above the shard (namespaces
  in the index store, the I/O pool, the data directory lock, subscriptions' cursors, TTL imports);
- :mod:`.segment` — the ``segment`` adapter (production default): :mod:`storage_engine.segment`
  shards with the object-store tier of :mod:`storage_engine.tier`;
- :mod:`.rocksdb` — the ``rocksdb`` adapter: records and indexes in one RocksDB database;
- :mod:`.listing` — a shard's segment files for readers outside the node (the ``segment-files`` route).

The top of the library below the node: an adapter may import :class:`storage_engine.engine.Engine`,
every store (:mod:`storage_engine.segment`, :mod:`storage_engine.memory`, :mod:`storage_engine.tier`)
and everything below them; only :func:`storage_engine.open_engine`, :mod:`storage_engine.node` and
:mod:`storage_engine.bench` import an adapter. Replication (``storage_engine/replication/``, to come)
goes beside :mod:`storage_engine.tier`: above the segment store and :mod:`storage_engine.node_api`,
composed into the ``segment`` adapter here.
"""
