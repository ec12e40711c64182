"""Bytes on disk and on the wire: the record batch format and what is read or framed with it.

- :mod:`.codec` — the record batch format of segment files (pure Python: Spark jobs import it);
- :mod:`.batch_columns` — column walks over encoded batches, a batch rebuilt with some of its records;
- :mod:`.columnar` — vectorised (numpy) views of encoded batches, for key compaction;
- :mod:`.framing` — one batch as the body of the node's produce and fetch routes;
- :mod:`.segment_files` — segment files as a reader outside the node sees them (Spark);
- :mod:`.ttl_import` — the import directory a TTL-index SST file is ingested from.

A format module may import only the contract's :mod:`storage_engine.api` and
:mod:`storage_engine.errors` and other format modules: stores, the node and the Spark jobs read
and write bytes through them, never the other way round.
"""
