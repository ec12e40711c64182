"""The segment store under the ``segment`` adapter (production default): Kafka-style segment files
per shard, indexed in RocksDB. One module per thing on disk:

- :mod:`storage_engine.formats.codec` — the batch format inside segment files;
- :mod:`.segment` — one segment file; :mod:`.meta` — its metadata;
- :mod:`.log` — the segments of one shard (rolling, reads, file lifecycle);
  :mod:`.recovery` — bringing them and the index back in line at open;
  :mod:`.rewrite` — a segment rewritten without some records (``.cleaned``);
- :mod:`.shard` — what both log adapters' shards share (locks, expiry, deletion);
  :mod:`.shard_index` — one shard's part of the index; :mod:`.dead_marks` — marking
  records dead; :mod:`.verify` — checking the index against the records;
- :mod:`.index_store` — the RocksDB index store (also used by the ``rocksdb`` adapter);
  :mod:`.index_keys` — its key and value formats; :mod:`.index_records` — its
  checkpoint and namespace records; :mod:`.ttl_ingest` — bulk TTL SST loads;
- :mod:`.datadir` — the data directory's lock and format marker;
- :mod:`.iopool` — the I/O worker pool (group commit);
- :mod:`.tiered_log` — a shard's segments with their tier states (local, uploading, both, remote);
- :mod:`.retired` — deleted files waiting for their delay and their readers.

The adapters over this store are :mod:`storage_engine.adapters.segment` and
:mod:`storage_engine.adapters.rocksdb` (which uses the index store only), with what they share in
:mod:`storage_engine.adapters.indexed`.

May import :mod:`storage_engine.compaction`, :mod:`storage_engine.lifecycle` (the shard protocols),
:mod:`storage_engine.rules`, :mod:`storage_engine.formats` and the contract — never an adapter,
:class:`~storage_engine.engine.Engine` or :mod:`storage_engine.tier`: the tier is built on this store
(its metadata, files and tier states), so it imports this package and not the reverse.
"""
