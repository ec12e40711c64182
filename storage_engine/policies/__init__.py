"""Configuration rules of the lifecycle: every policy field, its default, its bounds (DESIGN §3).

- :mod:`.policy` — :class:`~storage_engine.policies.policy.NamespacePolicy` and
  :class:`~storage_engine.policies.policy.NodePolicy`: every field, its built-in default and its rule;
- :mod:`.bounds` — the numeric bounds every boundary shares and the one wording of a number's rule;
- :mod:`.keymap_size` — the geometry of compaction's key map, so a policy can refuse a budget
  below what the map can honour.

The lowest package of the engine: it may import only :mod:`storage_engine.errors` and the standard
library, since the contract itself (:mod:`storage_engine.api`, :mod:`storage_engine.model`,
:mod:`storage_engine.config`) is built on it. Nothing here knows a store, a shard or the node.
"""
