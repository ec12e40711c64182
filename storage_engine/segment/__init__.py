"""The ``segment`` adapter (production default): Kafka-style segment files per
shard, indexed in RocksDB. One module per thing on disk:

- :mod:`storage_engine.codec` — the batch format inside segment files;
- :mod:`.segment` — one segment file; :mod:`.meta` — its metadata;
- :mod:`.log` — the segments of one shard (rolling, recovery, reads);
- :mod:`.index_store` — the RocksDB index store (also used by the ``rocksdb`` adapter);
- :mod:`.datadir` — the data directory's lock and format marker;
- :mod:`.iopool` — the I/O worker pool (group commit);
- :mod:`.base_adapter` and :mod:`.adapter` — the StorageAdapter.
"""
