"""What the node server, its client and the control plane share: the node's HTTP vocabulary.

- :mod:`.protocol` — every lifecycle operation of the node boundary (scope, destructive, dry run,
  arguments), defined once;
- :mod:`.wire` — the JSON shapes of the node API and the mapping of engine errors to HTTP statuses;
- :mod:`.problem` — RFC 9457 problem details, the one error body of every HTTP answer;
- :mod:`.client` — the typed Python client of a node (used by the control plane and the benches);
- :mod:`.placement` — which shard a record goes to when the producer does not say;
- :mod:`.logs` — one log format for every process (web, Celery, storage node).

May import the contract (:mod:`storage_engine.api`, :mod:`storage_engine.errors`),
:mod:`storage_engine.policies`, :mod:`storage_engine.rules` (argument validation) and
:mod:`storage_engine.formats` (batch framing) — never a store, an adapter or :mod:`storage_engine.node`
(the server imports this package, not the reverse). Replication between nodes
(``storage_engine/replication/``, to come) will reach other nodes through this client.
"""
