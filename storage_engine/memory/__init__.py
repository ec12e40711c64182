"""The in-memory store under the ``memory`` adapter (:mod:`storage_engine.adapters.memory`): the
whole contract without files, for tests and low-latency use. Nothing survives
:meth:`~storage_engine.adapters.memory.MemoryAdapter.close`.

Segments are logical (DESIGN §2): they roll by :func:`record_size` and age by
the same rule as the file adapter (:func:`should_roll`), so the catalog looks
the same whichever adapter a node runs.

Lifecycle (DESIGN §3) through the engine's parts
(:class:`~storage_engine.engine.Engine`): the TTL index is a heap
per namespace over a dict per shard (the dict is the index, the heap orders
it; entries leave the heap lazily), dead records are a set per segment, a
rewrite frees the slots of dead records (offsets stay positional), and whole
segments leave the list. "Disk" use is the stored bytes against
``EngineConfig.disk_capacity_bytes``.

May import :mod:`storage_engine.compaction`, :mod:`storage_engine.lifecycle`, :mod:`storage_engine.rules`,
:mod:`storage_engine.formats` and the contract — never an adapter or another store.
"""

# Modules: ``segment`` (a logical segment), ``shard`` (a shard's log, indexes and lifecycle
# mechanisms; its namespace), ``adapter`` (the store under the engine).
