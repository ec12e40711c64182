"""The ``segment`` adapter (production default): Kafka-style segment files per
shard, indexed in RocksDB. One module per thing on disk:

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
- :mod:`.base_adapter` and :mod:`.adapter` — the StorageAdapter.
"""
