"""The storage node: the one process that opens a data directory and serves it over HTTP (``/v1``).

- :mod:`.server` — ``storage-node`` (``storage_engine.node.server:main``): configuration, the engine, the
  HTTP server; :mod:`.app` — the app over one :class:`~storage_engine.api.StorageAdapter`;
  :mod:`.routes` — the route table;
- routes per subject: :mod:`.lifecycle`, :mod:`.subscriptions`, :mod:`.segment_files`, :mod:`.ttl_index`,
  :mod:`.schedule`, :mod:`.probes`; :mod:`.params` — request arguments and bodies; :mod:`.problems` —
  errors as problem details; :mod:`.auth` — bearer tokens; :mod:`.idempotency` — retried produces;
- :mod:`.metrics`, :mod:`.engine_metrics`, :mod:`.metric_catalog` — ``/metrics``.

The top of the engine: may import everything in :mod:`storage_engine` (the vocabulary it shares with
the client and the control plane is :mod:`storage_engine.node_api`), and nothing in the engine imports
it. Replication between nodes (``storage_engine/replication/``, to come) would add its follower-fetch
routes here and its logic beside :mod:`storage_engine.tier`.
"""
