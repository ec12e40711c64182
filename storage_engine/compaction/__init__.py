"""Key compaction, the log cleaner (DESIGN §3): Kafka's log cleaner and RocketMQ's compaction topic.

For ``cleanup_policy`` containing ``compact`` the engine keeps, per key, only
the latest record. The rules live here, once for every adapter:

- **Cleanable range.** Each shard persists a *cleaner checkpoint*: the first
  dirty offset (everything below it was cleaned) and the history of cleaning
  passes (``(end offset, clean time)``), atomically (one RocksDB put for the
  log adapters). The range runs from the first dirty offset up to the first
  uncleanable offset: the active segment's base, or the base of the first
  sealed segment holding records newer than ``min_compaction_lag_ms``.
- **When.** ``dirty_bytes / (clean_bytes + dirty_bytes) >
  min_cleanable_dirty_ratio`` (segments wholly below the first dirty offset
  are clean, the others up to the first uncleanable offset dirty), or dirty
  data older than ``max_compaction_lag_ms``. ``manual`` runs a pass anyway.
  A step first seals an idle active segment (DESIGN §3 "Idle shards",
  :func:`storage_engine.rules.rolling.idle_segment_due`, which for a compacted
  namespace includes an age past ``max_compaction_lag_ms``), so dirty data of
  a shard nobody writes to is cleaned too; a dry run counts that segment as
  sealed without sealing it (:func:`sealed_view`).
- **Key map.** :class:`~storage_engine.compaction.keymap.KeyMap` maps a key to the latest
  offset seen, within a memory budget in bytes
  (``NodePolicy.compaction_map_budget_bytes`` or per call): an open-addressing
  table (double hashing, a prime number of slots, filled to ``LOAD_FACTOR``),
  ``SLOT_BYTES`` = 16 bytes a slot: 96 bits of two seeded hash chains over the
  key (Kafka keeps a 16-byte MD5; a false "superseded" needs two keys of one
  round to collide, about n²/2⁹⁷ for n keys) and the offset as a 32-bit delta
  from the round's first offset. Beside the table, 1/32 of the budget is a
  bitmap of the round's offsets: when a key comes again while the map fills,
  its previous offset's bit is set, so a record within the round is known
  superseded without its key (records below the round are looked up). A round
  fills the map over the dirty range from the first dirty offset; when it is
  full, or the round spans the bitmap's bits (budget / 4 offsets), the round
  cleans what it covers and the next round continues from there.
- **Vectorised.** Segment files are read a chunk of batches at a time into
  numpy columns (:mod:`storage_engine.formats.columnar`: record positions, offsets,
  attributes, keys 8 bytes at a time; no value, tag or header is decoded);
  keys are hashed, put into the map and looked up a chunk at a time
  (:mod:`storage_engine.compaction.keymap`), the keep rule is a mask over a chunk
  (:mod:`storage_engine.compaction.keep_rule`), and a batch losing records is rebuilt
  by a row gather of the kept records' bytes. How segments of each adapter
  are read is :mod:`storage_engine.compaction.store_io`. The other adapters hand over
  :class:`~storage_engine.api.Record` objects; their keys are hashed the same
  way (:func:`storage_engine.compaction.keymap.hash_keys`).
- **Keep rule.** Within ``[log start, map end)`` a record is kept iff it is
  the latest for its key (records past the map end and records without a key
  are kept), it is not expired (:mod:`storage_engine.rules.expiry`), and, if a
  tombstone, its delete horizon (the time its offset was first cleaned +
  ``delete_retention_ms``) has not passed.
- **Rewrite.** Through each adapter's ``rewrite_segment(base, now,
  remove=rule)``: the rule (:data:`storage_engine.lifecycle.RemovalRule`) is
  asked per batch while the segment streams through, so nothing of a segment
  is collected first. The ``segment`` adapter's crash-safe ``.cleaned`` →
  ``.swap`` → ``.log`` swap copies unchanged batches as they are and rebuilds
  the others from their encoded records (only the header and offset deltas
  change); the ``rocksdb`` adapter deletes a chunk per WriteBatch followed by
  ``compact_range``; the memory adapter removes slots. Offsets never change; a
  segment left without records is dropped whole.

Memory: the map (table and bitmap, :attr:`KeyMap.memory_bytes`) stays within
the budget: its slots are the largest prime ≤ (budget − bitmap) / 16, the
bitmap being budget/32 but at least 64 bytes. A budget below
``MIN_MAP_BUDGET_BYTES`` (:mod:`storage_engine.policies.keymap_size`: a one-key table
and the minimal bitmap) is refused, never enlarged; a budget that fits one key
cleans one key per round. The map is allocated once per
compaction call and reused by every round. The fixed overhead beyond it does
not grow with the segment or the record count: the rewrite's read chunk
(1 MiB; a larger batch is read whole) and the columns of the batches in it
(~0.1–0.2 KB per record while a chunk is decided), the map's insertions of at
most ``FILL_KEYS`` keys (and at most an eighth of its capacity) with their
temporaries (~100 bytes a key), the 256 KiB output buffer, a chunk of at most
``UNINDEX_CHUNK`` expired records, and the new sparse offset index of the
segment being rewritten (16 bytes per ``index_interval_bytes``: bounded by
``segment_bytes``, 256 KiB for 64 MiB). ``MAP_OVERHEAD_BYTES`` (4 MiB) is the
stated bound for read chunks of ~1 MiB; the tests check it with tracemalloc
(a 60k-record segment with a 64 KiB map; numpy arrays are traced too).
Two things are not constant: index deletions of removed records that carry
tags or a deadline, or are their key's latest entry (a tombstone past its
horizon), ride in the swap's single WriteBatch (crash safety needs them in
one write; none for plain superseded records), and a dry run keeps one bit
per offset of the segments it would change (what earlier simulated rounds
removed).

Modules: ``checkpoint`` (the cleaner checkpoint), ``cleanable`` (the cleanable range and when it
is due), ``rules`` (the keep rule of a round, a dry run's removals), ``keymap`` (the key map),
``keep_rule`` (the keep rule's vectorised mask), ``store_io`` (what key compaction asks of a shard:
:class:`~storage_engine.compaction.store_io.CompactableShard`, and how each store's segments are read),
``cleaner`` (:class:`~storage_engine.compaction.cleaner.LogCleaner`, the engine's part).

May import :mod:`storage_engine.lifecycle`, :mod:`storage_engine.rules`, :mod:`storage_engine.formats`,
:mod:`storage_engine.policies` and the contract — never a store, an adapter or the tier: every store's
shard implements :class:`~storage_engine.compaction.store_io.CompactableShard`, and the stores import
this package, not the reverse.
"""
